/**
 * JSON as the API reads it: parsed here rather than by the platform (whose reader answers invalid
 * JSON with a 500), with a nesting limit checked before parsing.
 */
import { Either } from "effect"
import { InvalidRequest } from "./Errors.js"

/** Deeper JSON is refused: nothing we accept nests beyond a few levels, and recursion has limits. */
export const MAX_JSON_DEPTH = 64

/** Parses JSON no deeper than MAX_JSON_DEPTH (checked by a scan before parsing). */
export const parseJson = (text: string): Either.Either<unknown, InvalidRequest> => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92 /* \\ */) i++
      else if (c === 34 /* " */) inString = false
    } else if (c === 34) inString = true
    else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > MAX_JSON_DEPTH) {
        return Either.left(new InvalidRequest({ description: `JSON nested more than ${MAX_JSON_DEPTH} levels deep` }))
      }
    } else if (c === 93 /* ] */ || c === 125 /* } */) depth--
  }
  try {
    return Either.right(JSON.parse(text))
  } catch {
    return Either.left(new InvalidRequest({ description: "The request body is not valid JSON" }))
  }
}
