"""Samples from warmlake.torch fed to a device through DeviceLoader, their
bytes checked on that device: the CPU always; CUDA too where there is one
(pinned host memory, non_blocking copies on a side stream, the comparison
run on the GPU). Here:
    WL_BUILD=build /usr/bin/python3 -m pytest -q tests/integration/test_py_device.py
On a GPU host without this project's packages (PyTorch and pytest there): pack the build
with tests/integration/device_bundle.sh, copy the repository with .gpu/ to it, and run
bash .gpu/run.sh there. On an H200 with torch 2.11 (2026-12-04) all six passed, 4 runs of 4,
after the bundle found that an empty tensor loaded with map_location stayed on the CPU."""
import hashlib
import io
import tarfile

import pytest

from conftest import AK, SK
from pyclient import need_lib

torch = pytest.importorskip("torch")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
N, SIZE = 64, 4096


def payload(i):
    return (hashlib.sha256(b"%d" % i).digest() * (SIZE // 32))[:SIZE]


def check_on_device(loader, device):
    """Every batch of loader ({"x": samples, "idx": their numbers}) through DeviceLoader lands on
    device and equals the payloads, compared where the bytes are; every sample exactly once."""
    import warmlake.torch as wt
    want = torch.stack([torch.frombuffer(bytearray(payload(i)), dtype=torch.uint8)
                        for i in range(N)]).to(device)
    seen = []
    for batch in wt.DeviceLoader(loader, device=device):
        assert batch["x"].device.type == device
        assert torch.equal(batch["x"], want[batch["idx"].to(device)])
        seen += batch["idx"].tolist()
    assert sorted(seen) == list(range(N))


@pytest.mark.parametrize("device", DEVICES)
def test_shards_to_device(server, device):
    need_lib()
    import warmlake
    import warmlake.torch as wt
    c = warmlake.Client(server.endpoint, access_key=AK, secret_key=SK)
    c.create_bucket("dev")
    for s in range(4):
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode="w", format=tarfile.USTAR_FORMAT) as t:
            for i in range(s * N // 4, (s + 1) * N // 4):
                for ext, data in (("idx", b"%d" % i), ("bin", payload(i))):
                    info = tarfile.TarInfo("%04d.%s" % (i, ext))
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
        c.put("dev", "s/%d.tar" % s, b.getvalue())

    def collate(samples):
        x = torch.stack([torch.frombuffer(bytearray(s["bin"]), dtype=torch.uint8)
                         for s in samples])
        return {"x": x, "idx": torch.tensor([int(s["idx"]) for s in samples])}

    ds = wt.ShardDataset("dev", prefix="s/", client=c, seed=3, shuffle_buffer=8)
    loader = torch.utils.data.DataLoader(ds, batch_size=16, num_workers=2, collate_fn=collate,
                                         pin_memory=device == "cuda")
    check_on_device(loader, device)
    c.close()


@pytest.mark.parametrize("device", DEVICES)
def test_objects_to_device(server, device):
    """Map-style samples, each step one batch GET read straight into tensors, to the device."""
    need_lib()
    import warmlake
    import warmlake.torch as wt
    c = warmlake.Client(server.endpoint, access_key=AK, secret_key=SK)
    c.create_bucket("devo")
    for i in range(N):
        c.put("devo", "o/%04d" % i, payload(i))
    ds = wt.ObjectDataset("devo", prefix="o/", client=c, as_tensor=True,
                          transform=lambda t, k: (int(k[2:]), t))
    sampler = torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(range(N)), 12, False)

    def collate(batch):
        return {"idx": torch.tensor([i for i, _ in batch]),
                "x": torch.stack([t for _, t in batch])}

    loader = torch.utils.data.DataLoader(ds, batch_size=None, sampler=sampler, num_workers=2,
                                         collate_fn=collate, pin_memory=device == "cuda")
    check_on_device(loader, device)
    c.close()


@pytest.mark.parametrize("device", DEVICES)
def test_checkpoint_from_and_to_device(server, device):
    """A state dict of device tensors saved, loaded onto the device and into device tensors
    in place, compared bit for bit where they live."""
    need_lib()
    import warmlake
    import warmlake.torch as wt
    c = warmlake.Client(server.endpoint, access_key=AK, secret_key=SK)
    c.create_bucket("devc")
    g = torch.Generator().manual_seed(5)
    sd = {"model": {"w": torch.randn(1024, 3000, generator=g).to(device),  # multipart
                    "h": torch.randn(333, 77, generator=g).to(torch.bfloat16).to(device),
                    "i": torch.arange(1000, dtype=torch.int64).to(device),
                    "e": torch.empty(0, 4, device=device)},
          "step": 17}
    wt.save_checkpoint(c, "devc", "ck", sd)

    def same(got):
        assert got["step"] == 17
        for k, v in sd["model"].items():
            t = got["model"][k]
            assert t.device.type == device and t.dtype == v.dtype and t.shape == v.shape
            assert torch.equal(t, v), k

    same(wt.load_checkpoint(c, "devc", "ck", map_location=device))
    into = {"model": {k: torch.zeros_like(v) for k, v in sd["model"].items()}}
    before = dict(into["model"])
    got = wt.load_checkpoint(c, "devc", "ck", into=into)
    same(got)
    for k in before:
        assert got["model"][k] is before[k]  # read in place, on the device
    c.close()
