/**
 * An operator's bearer token as it is compared: its SHA-256, so that `timingSafeEqual` compares
 * equal lengths whatever was sent (the admin tokens, the metrics token). Apart from the header
 * parsing (`http/AuthorizationHeader`), so that reading the token settings needs nothing of HTTP.
 */
import { createHash } from "node:crypto"

export const tokenDigest = (token: string): Buffer => createHash("sha256").update(token, "utf8").digest()
