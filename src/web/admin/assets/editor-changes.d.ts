// Types of editor-changes.js, for the TypeScript unit tests (test/EditorChanges.test.ts) only: the
// page itself is plain JavaScript with no build step.

export interface Credential {
  readonly client_id: string
  readonly created_at: string | null
  readonly last_used_at: string | null
}
export interface Handler {
  readonly type: string
  readonly url?: string
  readonly timeout_ms?: number
  /** Answered: the static headers' names. Sent: names with values (replacing them). */
  readonly headers?: ReadonlyArray<string> | Readonly<Record<string, string>>
}
export interface Service {
  readonly uuid: string
  readonly name: string
  readonly auth_type: string
  readonly handler: Handler | undefined
  readonly credentials: ReadonlyArray<Credential>
}
export interface Environment {
  readonly name: string
  readonly services: ReadonlyArray<Service>
}
export interface ProfileDoc {
  readonly profile: string
  readonly created_at: string | null
  readonly environments: ReadonlyArray<Environment>
}
export interface StagedAdd {
  readonly key: string
  readonly environment: string
  readonly service_uuid: string
}
export interface StagedRemoval {
  readonly environment: string
  readonly service_uuid: string
  readonly client_id: string
}
export interface Changes {
  readonly profile: string | null
  readonly adds: ReadonlyArray<StagedAdd>
  readonly removes: ReadonlyArray<StagedRemoval>
  readonly nextKey: number
}
export type SaveChange =
  | { readonly op: "add_credential"; readonly environment: string; readonly service_uuid: string }
  | { readonly op: "remove_credential"; readonly environment: string; readonly service_uuid: string; readonly client_id: string }

export declare const MAX_CREDENTIALS: 2
export declare function emptyChanges(profile?: string | null): Changes
export declare function isDirty(changes: Changes): boolean
export declare function changesFor(
  changes: Changes,
  environment: string,
  uuid: string
): { adds: Array<StagedAdd>; removes: Array<StagedRemoval> }
export declare function isRemovalStaged(changes: Changes, environment: string, uuid: string, clientId: string): boolean
export declare function projectedCount(changes: Changes, environment: string, service: Service): number
export declare function canAdd(changes: Changes, environment: string, service: Service): boolean
export declare function stageAdd(
  changes: Changes,
  environment: string,
  service: Service
): { changes: Changes; add: StagedAdd } | null
export declare function unstageAdd(changes: Changes, key: string): Changes
export declare function stageRemoval(changes: Changes, environment: string, service: Service, clientId: string): Changes
export declare function unstageRemoval(changes: Changes, environment: string, uuid: string, clientId: string): Changes
export declare function reconcile(changes: Changes, doc: ProfileDoc): Changes
export declare function overLimit(
  changes: Changes,
  doc: ProfileDoc
): Array<{ environment: string; service_uuid: string; count: number }>
export declare function saveRequest(changes: Changes): { changes: Array<SaveChange> }
export declare function plural(n: number, one: string, many: string): string
export declare function summaryText(changes: Changes): string
export declare function normalizeDoc(data: unknown, profile: string): ProfileDoc
export declare function serviceUpdate(
  service: Service,
  name: string,
  handlerType: string,
  url?: string,
  proxy?: { readonly timeoutMs?: string; readonly headers?: Readonly<Record<string, string>> }
): { name: string; auth_type: string; handler: Handler }
export declare function headerLines(
  text: string
): { readonly headers: Record<string, string>; readonly error?: undefined } | { readonly error: string; readonly headers?: undefined }
