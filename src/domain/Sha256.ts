/**
 * SHA-256 of a text's UTF-8 bytes, base64url without padding: the form JOSE uses for a DPoP proof's
 * `ath` and a key's thumbprint (RFC 9449, RFC 7638), and the key the token cache and the seen-jti
 * set remember by. Several of these run on every call, so `crypto.hash` (Node 20.12+, no Hash
 * object) is used where Node has it; the result is the same bytes either way.
 */
import * as NodeCrypto from "node:crypto"

const { hash } = NodeCrypto as { hash?: (algorithm: string, data: string, encoding: "base64url") => string }

export const sha256Base64url: (text: string) => string = hash === undefined
  ? (text) => NodeCrypto.createHash("sha256").update(text).digest("base64url")
  : (text) => hash("sha256", text, "base64url")
