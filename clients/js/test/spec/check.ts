// The package's types checked against the spec's, as openapi-typescript generates them from
// openapi.yaml (into test/spec/openapi.d.ts, by `npm run spec`): tsc fails when they part.
import type { components } from "./openapi.js";
import type { JobBody, KnownStatus, JobStatus, RenditionBody } from "../../src/index.js";

type Schemas = components["schemas"];
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const yes = <T extends true>(value: T) => value;

// The pushed job is typed: it is the Job, not a bare object.
yes<Same<Schemas["PushMessage"]["job"], Schemas["Job"]>>(true);
// The statuses of this version are the package's.
yes<Same<Schemas["KnownStatus"], KnownStatus>>(true);
// Statuses are open both sides: a later one is a valid status, and the package takes it.
const later: Schemas["Status"] = "quarantined";
const taken: JobStatus = later;
// The package reads every field of a rendition and of a variant (cache_key, width, height...).
yes<Same<keyof Schemas["Rendition"], keyof RenditionBody>>(true);
yes<Same<keyof Schemas["Variant"], keyof NonNullable<RenditionBody["variants"]>[string]>>(true);
// Every job the spec describes is a body the package reads (pushed or got).
const read = (job: Schemas["Job"]): JobBody => job;
const pushed = (message: Schemas["PushMessage"]): JobBody => message.job;
void taken; void read; void pushed;
// The focus a job shows is the package's Focus, and the upload's is the spec's ClientFocus.
import type { Focus, UploadOptions } from "../../src/index.js";
const focusRead = (focus: Schemas["Focus"]): Focus => focus;
const focusSent = (focus: Schemas["ClientFocus"]): UploadOptions["focus"] => focus;
void focusRead; void focusSent;
