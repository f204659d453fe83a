"""Samples from warmlake.torch fed to a device through DeviceLoader, their
bytes checked on that device: the CPU always; CUDA too where there is one
(pinned host memory, non_blocking copies on a side stream, the comparison
run on the GPU). One short script for GPU machines:
    WL_BUILD=build /usr/bin/python3 -m pytest -q tests/integration/test_py_device.py"""
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
    want = torch.stack([torch.frombuffer(bytearray(payload(i)), dtype=torch.uint8)
                        for i in range(N)]).to(device)
    seen = []
    for batch in wt.DeviceLoader(loader, device=device):
        assert batch["x"].device.type == device
        # The comparison runs where the bytes are.
        assert torch.equal(batch["x"], want[batch["idx"].to(device)])
        seen += batch["idx"].tolist()
    assert sorted(seen) == list(range(N))
    c.close()
