/*
 * s3_errors: the one table of S3 errors warmlaked answers with: the code a
 * client matches on, the HTTP status that goes with it, and the default
 * message (AWS's wording where AWS has the error). Call sites name the code
 * (S3E_NO_SUCH_KEY); the status and message come from here.
 */
#ifndef WL_S3_ERRORS_H
#define WL_S3_ERRORS_H

/* X(name, code, status, default message) */
#define S3_ERRORS(X)                                                                               \
    X(ACCESS_DENIED, "AccessDenied", 403, "Access Denied")                                         \
    X(ACL_NOT_SUPPORTED, "AccessControlListNotSupported", 400, "The bucket does not allow ACLs")   \
    X(AUTH_HEADER_MALFORMED, "AuthorizationHeaderMalformed", 400,                                  \
      "The authorization header you provided is invalid.")                                         \
    X(AUTH_QUERY_MALFORMED, "AuthorizationQueryParametersError", 400,                              \
      "Error parsing the query-string authentication parameters.")                                 \
    X(CORS_FORBIDDEN, "AccessForbidden", 403,                                                      \
      "CORSResponse: This CORS request is not allowed. This is usually because the evalution of "  \
      "Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers "  \
      "are not whitelisted by the resource's CORS spec.")                                          \
    X(BAD_DIGEST, "BadDigest", 400,                                                                \
      "The Content-MD5 you specified did not match what we received.")                             \
    X(BAD_REQUEST, "BadRequest", 400, "Bad Request")                                               \
    X(BUCKET_EXISTS, "BucketAlreadyExists", 409,                                                   \
      "The requested bucket name is not available. The bucket namespace is shared by all users "   \
      "of the system. Please select a different name and try again.")                              \
    X(BUCKET_OWNED, "BucketAlreadyOwnedByYou", 409,                                                \
      "Your previous request to create the named bucket succeeded and you already own it.")        \
    X(BUCKET_NOT_EMPTY, "BucketNotEmpty", 409, "The bucket you tried to delete is not empty.")     \
    X(ENTITY_TOO_LARGE, "EntityTooLarge", 400,                                                     \
      "Your proposed upload exceeds the maximum allowed object size.")                             \
    X(ENTITY_TOO_SMALL, "EntityTooSmall", 400,                                                     \
      "Your proposed upload is smaller than the minimum allowed size")                             \
    X(ILLEGAL_LOCATION, "IllegalLocationConstraintException", 400,                                 \
      "The location constraint is incompatible for the region specific endpoint this request "     \
      "was sent to.")                                                                              \
    X(INCOMPLETE_BODY, "IncompleteBody", 400, "The request body is incomplete or malformed.")      \
    X(INVALID_LOCATION, "InvalidLocationConstraint", 400,                                          \
      "The specified location-constraint is not valid")                                            \
    X(REQUEST_TIMEOUT, "RequestTimeout", 400,                                                      \
      "Your socket connection to the server was not read from or written to within the timeout "   \
      "period. Idle connections will be closed.")                                                  \
    X(INSUFFICIENT_STORAGE, "InsufficientStorage", 507,                                            \
      "Not enough storage space to store the object.")                                             \
    X(INTERNAL, "InternalError", 500, "We encountered an internal error. Please try again.")       \
    X(INVALID_ACCESS_KEY, "InvalidAccessKeyId", 403,                                               \
      "The AWS Access Key Id you provided does not exist in our records.")                         \
    X(INVALID_ARGUMENT, "InvalidArgument", 400, "Invalid Argument")                                \
    X(INVALID_BUCKET_NAME, "InvalidBucketName", 400, "The specified bucket is not valid.")         \
    X(INVALID_CHUNK_SIZE, "InvalidChunkSizeError", 400,                                            \
      "Only the last chunk is allowed to have a size less than 8192 bytes")                        \
    X(INVALID_DIGEST, "InvalidDigest", 400, "The Content-MD5 you specified is not valid.")         \
    X(INVALID_PART, "InvalidPart", 400,                                                            \
      "One or more of the specified parts could not be found. The part may not have been "         \
      "uploaded, or the specified entity tag may not match the part's entity tag.")                \
    X(INVALID_PART_ORDER, "InvalidPartOrder", 400,                                                 \
      "The list of parts was not in ascending order. Parts must be ordered by part number.")       \
    X(INVALID_PART_NUMBER, "InvalidPartNumber", 416,                                               \
      "The requested partnumber is not satisfiable")                                               \
    X(INVALID_RANGE, "InvalidRange", 416, "The requested range is not satisfiable")                \
    X(INVALID_BUCKET_ACL_OWNERSHIP, "InvalidBucketAclWithObjectOwnership", 400,                    \
      "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting")            \
    X(INVALID_REQUEST, "InvalidRequest", 400, "Invalid Request")                                   \
    X(INVALID_STORAGE_CLASS, "InvalidStorageClass", 400,                                           \
      "The storage class you specified is not valid")                                              \
    X(INVALID_TAG, "InvalidTag", 400, "The TagKey you have provided is invalid")                   \
    X(INVALID_TOKEN, "InvalidToken", 400, "The provided token is malformed or otherwise invalid.") \
    X(INVALID_URI, "InvalidURI", 400, "Couldn't parse the specified URI.")                         \
    X(KEY_TOO_LONG, "KeyTooLongError", 400, "Your key is too long")                                \
    X(MALFORMED_ACL, "MalformedACLError", 400,                                                     \
      "The XML you provided was not well-formed or did not validate against our published "        \
      "schema.")                                                                                   \
    X(MALFORMED_XML, "MalformedXML", 400,                                                          \
      "The XML you provided was not well-formed or did not validate against our published "        \
      "schema.")                                                                                   \
    X(MALFORMED_POST, "MalformedPOSTRequest", 400,                                                 \
      "The body of your POST request is not well-formed multipart/form-data.")                     \
    X(INVALID_POLICY_DOCUMENT, "InvalidPolicyDocument", 400,                                       \
      "The content of the form does not meet the conditions specified in the policy document.")    \
    X(MAX_POST_PRE_DATA, "MaxPostPreDataLengthExceededError", 400,                                 \
      "Your POST request fields preceding the upload file were too large.")                        \
    X(METADATA_TOO_LARGE, "MetadataTooLarge", 400,                                                 \
      "Your metadata headers exceed the maximum allowed metadata size.")                           \
    X(METHOD_NOT_ALLOWED, "MethodNotAllowed", 405,                                                 \
      "The specified method is not allowed against this resource.")                                \
    X(MISSING_CONTENT_LENGTH, "MissingContentLength", 411,                                         \
      "You must provide the Content-Length HTTP header.")                                          \
    X(MISSING_SECURITY_HEADER, "MissingSecurityHeader", 400,                                       \
      "Your request was missing a required header")                                                \
    X(NO_SUCH_BUCKET, "NoSuchBucket", 404, "The specified bucket does not exist.")                 \
    X(NO_SUCH_BUCKET_POLICY, "NoSuchBucketPolicy", 404, "The bucket policy does not exist")        \
    X(NO_SUCH_CORS, "NoSuchCORSConfiguration", 404, "The CORS configuration does not exist")       \
    X(NO_OWNERSHIP_CONTROLS, "OwnershipControlsNotFoundError", 404,                                \
      "The bucket ownership controls were not found")                                              \
    X(NO_SUCH_KEY, "NoSuchKey", 404, "The specified key does not exist.")                          \
    X(NO_SUCH_LIFECYCLE, "NoSuchLifecycleConfiguration", 404,                                      \
      "The lifecycle configuration does not exist")                                                \
    X(NO_SUCH_UPLOAD, "NoSuchUpload", 404,                                                         \
      "The specified multipart upload does not exist. The upload ID might be invalid, or the "     \
      "multipart upload might have been aborted or completed.")                                    \
    X(NO_SUCH_TAG_SET, "NoSuchTagSet", 404, "The TagSet does not exist")                           \
    X(NO_SUCH_VERSION, "NoSuchVersion", 404, "The specified version does not exist.")              \
    X(NO_SUCH_WEBSITE_CONFIGURATION, "NoSuchWebsiteConfiguration", 404,                            \
      "The specified bucket does not have a website configuration")                                \
    X(NO_SSE_CONFIGURATION, "ServerSideEncryptionConfigurationNotFoundError", 404,                 \
      "The server side encryption configuration was not found")                                    \
    X(NO_OBJECT_LOCK_CONFIGURATION, "ObjectLockConfigurationNotFoundError", 404,                   \
      "Object Lock configuration does not exist for this bucket")                                  \
    X(NO_PUBLIC_ACCESS_BLOCK, "NoSuchPublicAccessBlockConfiguration", 404,                         \
      "The public access block configuration was not found")                                       \
    X(NO_REPLICATION_CONFIGURATION, "ReplicationConfigurationNotFoundError", 404,                  \
      "The replication configuration was not found")                                               \
    X(NOT_IMPLEMENTED, "NotImplemented", 501,                                                      \
      "A header you provided implies functionality that is not implemented.")                      \
    X(PRECONDITION_FAILED, "PreconditionFailed", 412,                                              \
      "At least one of the preconditions you specified did not hold.")                             \
    X(REQUEST_TIME_TOO_SKEWED, "RequestTimeTooSkewed", 403,                                        \
      "The difference between the request time and the current time is too large.")                \
    X(SERVICE_UNAVAILABLE, "ServiceUnavailable", 503,                                              \
      "Too many drives are unavailable. A write answered so may still take effect once they "      \
      "are back: read before writing again.")                                                      \
    X(SIGNATURE_MISMATCH, "SignatureDoesNotMatch", 403,                                            \
      "The request signature we calculated does not match the signature you provided. Check "      \
      "your key and signing method.")                                                              \
    X(SLOW_DOWN, "SlowDown", 503, "Please reduce your request rate.")                              \
    X(UNEXPECTED_CONTENT, "UnexpectedContent", 400, "This request does not support content")       \
    X(UNRESOLVABLE_GRANT, "UnresolvableGrantByEmailAddress", 400,                                  \
      "The e-mail address you provided does not match any account on record.")                     \
    X(SHA256_MISMATCH, "XAmzContentSHA256Mismatch", 400,                                           \
      "The provided 'x-amz-content-sha256' header does not match what was computed.")

typedef enum {
#define S3E_ENUM(name, code, status, msg) S3E_##name,
    S3_ERRORS(S3E_ENUM)
#undef S3E_ENUM
        S3E_COUNT
} s3_err_t;

typedef struct {
    const char *code;
    int status;
    const char *message;
} s3_err_info_t;

/* The table row of e. */
const s3_err_info_t *s3_err_info(s3_err_t e);

#endif
