/**
 * The limits the server enforces and the profile editor shows, declared once. The domain's schemas
 * and storage import them; the server serves them to the editor as the module
 * `/admin/assets/Limits.js` (`editorModule`), which the editor's scripts import and are type-checked
 * against (tsconfig.editor.json resolves `./Limits.js` to this file). No imports, so that it means
 * the same in both places.
 */

/**
 * A service holds at most this many live credentials, so that a secret can be rotated without
 * downtime (docs/contract.md §0).
 */
export const MAX_CREDENTIALS = 2

/** A profile identifier or an environment name: at most this many characters. */
export const NAME_MAX_LENGTH = 128

/**
 * A profile identifier or an environment name: letters, digits, '.', '_' or '-', starting with a
 * letter or digit. Unanchored: the server anchors it.
 */
export const NAME_PATTERN = `[A-Za-z0-9][A-Za-z0-9._-]{0,${NAME_MAX_LENGTH - 1}}`

/** `NAME_PATTERN` as an HTML `pattern` attribute: browsers compile it with the `v` flag, where a '-' in a class is escaped. */
export const NAME_INPUT_PATTERN = NAME_PATTERN.replace("-]", "\\-]")

/** A service's name for people: at most this many characters. */
export const SERVICE_NAME_MAX_LENGTH = 200

/** A proxy service's upstream URL: at most this many characters. */
export const UPSTREAM_URL_MAX_LENGTH = 2048

/** A trusted issuer's name (workload identity federation): letters, digits, '.', '_' or '-'. Unanchored. */
export const TRUSTED_ISSUER_NAME_PATTERN_SOURCE = "[A-Za-z0-9._-]{1,64}"

/** The same as an HTML `pattern` attribute (the `v` flag: a '-' in a class is escaped). */
export const TRUSTED_ISSUER_NAME_INPUT_PATTERN = TRUSTED_ISSUER_NAME_PATTERN_SOURCE.replace("-]", "\\-]")

/** The algorithms a trusted issuer may sign with: asymmetric only, never `none` or HMAC. */
export const FEDERATION_ALGORITHMS = ["RS256", "ES256", "EdDSA"] as const

/** The longest token lifetime an issuer may be allowed (a week), and the default (an hour, a kubelet token's). */
export const MAX_TOKEN_LIFETIME_LIMIT_SECONDS = 604_800
export const DEFAULT_MAX_TOKEN_LIFETIME_SECONDS = 3_600

/** The most extra claims a federated credential may require, and the longest subject or claim value. */
export const FEDERATED_CLAIMS_MAX = 16
export const FEDERATED_CLAIM_TEXT_MAX = 1024

/** The module the editor imports: these constants as JavaScript. */
export const editorModule = (): string =>
  Object.entries({
    MAX_CREDENTIALS,
    NAME_MAX_LENGTH,
    NAME_INPUT_PATTERN,
    SERVICE_NAME_MAX_LENGTH,
    UPSTREAM_URL_MAX_LENGTH,
    TRUSTED_ISSUER_NAME_INPUT_PATTERN,
    FEDERATION_ALGORITHMS,
    MAX_TOKEN_LIFETIME_LIMIT_SECONDS,
    DEFAULT_MAX_TOKEN_LIFETIME_SECONDS,
    FEDERATED_CLAIMS_MAX,
    FEDERATED_CLAIM_TEXT_MAX
  })
    .map(([name, value]) => `export const ${name} = ${JSON.stringify(value)}\n`)
    .join("")
