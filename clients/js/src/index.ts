// @image-jobs/client: the image-jobs API for browsers, React Native and Node 20+.
export { Client, API_ROOT, SERVICE_SCOPE, isServiceToken, DEFAULT_MAX_UPLOAD_BYTES, DEFAULT_DIRECT_THRESHOLD, DEFAULT_MULTIPART_THRESHOLD, PART_CONCURRENCY, RETRY_ALWAYS, RETRY_IF_REPEATABLE } from "./client.js";
export type { ClientOptions, JobsOptions, UploadOptions, Progress, PartProgress, Answer, RequestOptions, WebSocketConstructor } from "./client.js";
export { Job, Status, TERMINAL } from "./job.js";
export type { JobBody, JobStatus, KnownStatus, Rendition, RenditionBody, SourceFacts, Variant, WaitOptions } from "./job.js";
export { Watch, PUSH_PROTOCOL, BEARER_PREFIX } from "./push.js";
export type { WatchOptions, WebSocketLike } from "./push.js";
export { memoryStorage } from "./storage.js";
export type { UploadStorage, UploadRecord } from "./storage.js";
export type { Source, UriSource } from "./source.js";
export { pickVariant } from "./variants.js";
export type { Picked } from "./variants.js";
export { decodePlaceholder } from "./placeholder.js";
export { phashDistance, PHASH_NEAR } from "./phash.js";
export type { Decoded } from "./placeholder.js";
export { guessType } from "./sniff.js";
export * as polling from "./polling.js";
export * from "./errors.js";
