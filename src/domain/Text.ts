/**
 * The one rule for free text a client sends that is stored: PostgreSQL `text` and `jsonb` cannot
 * hold U+0000 (the statement fails), an unpaired surrogate has no UTF-8 encoding (the driver would
 * silently store U+FFFD instead), and control characters have no place in a name or a URL.
 * Identifiers that are looked up (profile, environment, service uuid, client id) have stricter
 * patterns of their own (`Identifiers.ts`); every other stored string is `StorableText`.
 */
import { Schema } from "effect"

/** C0 controls, DEL, C1 controls; with the `u` flag the second class matches only unpaired surrogates. */
// eslint-disable-next-line no-control-regex
const UNSTORABLE = /[\u0000-\u001f\u007f-\u009f]|[\ud800-\udfff]/u

export const isStorableText = (value: string): boolean => !UNSTORABLE.test(value)

export const StorableText = Schema.String.pipe(
  Schema.filter(isStorableText, { message: () => "must not contain control characters or unpaired surrogates" })
)
