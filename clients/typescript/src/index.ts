// The Mnemos TypeScript client: the generated types of api/openapi.yaml
// and the fetch wrapper typed by them.

export { Client, MnemosError } from "./client.js";
export type { Answer, Args, ClientOptions, JsonBody, Method, Operation, PathParams, PathsOf, QueryParams, RequestOptions, Schemas } from "./client.js";
export type { components, operations, paths } from "./schema.js";
