/*
 * A public key pasted into the editor, for a key credential (private_key_jwt): a JWK (JSON) or a PEM
 * public key (`-----BEGIN PUBLIC KEY-----`). No DOM: WebCrypto only, so it runs in tests as well.
 *
 * A PEM is turned into a JWK here with WebCrypto (`importKey("spki")`, then `exportKey("jwk")`),
 * trying RSA, EC P-256 and Ed25519 in turn. When the browser imports none of them (an old one
 * without Ed25519), the PEM is sent as it is: the server accepts a PEM too, and judges it. The
 * server checks every key anyway (RSA of at least 2048 bits, EC P-256, Ed25519; public members
 * only); what is refused here is only what is plainly wrong, in words a person can act on.
 */

/** Members of a private or symmetric JWK: never sent. */
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]

/** The JWK members of each key type the server takes (RFC 7638), with `kid` when given. */
const PUBLIC_MEMBERS = { RSA: ["kty", "n", "e"], EC: ["kty", "crv", "x", "y"], OKP: ["kty", "crv", "x"] }

/** The WebCrypto imports tried for a PEM public key, in order. */
const PEM_IMPORTS = [
  { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
  { name: "ECDSA", namedCurve: "P-256" },
  { name: "Ed25519" }
]

export const KEY_FORMS = "a JWK (JSON) or a PEM public key (-----BEGIN PUBLIC KEY-----)"

/**
 * @typedef {{ readonly publicKey: Record<string, unknown> | string, readonly label: string, readonly error?: undefined }
 *   | { readonly error: string, readonly publicKey?: undefined, readonly label?: undefined }} PastedKey
 */

/**
 * A JWK's type in words: `RSA`, `EC P-256`, `Ed25519`, with its `kid` when it has one.
 * @param {Record<string, unknown>} jwk
 * @returns {string}
 */
export function keyLabel(jwk) {
  const type = jwk.kty === "OKP" ? String(jwk.crv ?? "OKP") : jwk.kty === "EC" ? `EC ${String(jwk.crv ?? "")}`.trim() : String(jwk.kty)
  return typeof jwk.kid === "string" && jwk.kid !== "" ? `${type}, kid ${jwk.kid}` : type
}

/**
 * A JWK as pasted: an object of a type the server takes, without private members.
 * @param {unknown} value
 * @returns {PastedKey}
 */
function pastedJwk(value) {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { error: `The public key must be ${KEY_FORMS}.` }
  }
  const jwk = /** @type {Record<string, unknown>} */ (value)
  const secret = PRIVATE_MEMBERS.filter((member) => member in jwk)
  if (secret.length > 0) {
    return { error: `This JWK holds private members (${secret.join(", ")}): paste the public key only.` }
  }
  if (!(typeof jwk.kty === "string" && jwk.kty in PUBLIC_MEMBERS)) {
    return { error: "A key credential is an RSA, EC P-256 or Ed25519 public key (kty RSA, EC or OKP)." }
  }
  return { publicKey: jwk, label: keyLabel(jwk) }
}

/**
 * The bytes of a PEM's body (DER); undefined when it is not base64.
 * @param {string} pem
 * @returns {ArrayBuffer | undefined}
 */
function pemBytes(pem) {
  const body = pem.replace(/-----(BEGIN|END) PUBLIC KEY-----/g, "").replace(/\s+/g, "")
  if (body === "" || !/^[A-Za-z0-9+/]+={0,2}$/.test(body)) return undefined
  try {
    return Uint8Array.from(atob(body), (c) => c.charCodeAt(0)).buffer
  } catch {
    return undefined
  }
}

/**
 * A PEM public key as a JWK of its public members, or undefined when WebCrypto imports it as none
 * of the key types tried.
 * @param {ArrayBuffer} der
 * @returns {Promise<Record<string, unknown> | undefined>}
 */
async function jwkOfSpki(der) {
  for (const algorithm of PEM_IMPORTS) {
    try {
      const key = await crypto.subtle.importKey("spki", der, algorithm, true, ["verify"])
      const exported = /** @type {Record<string, unknown>} */ (await crypto.subtle.exportKey("jwk", key))
      const members = PUBLIC_MEMBERS[/** @type {"RSA" | "EC" | "OKP"} */ (exported.kty)] ?? []
      return Object.fromEntries(members.filter((member) => exported[member] !== undefined).map((member) => [member, exported[member]]))
    } catch {
      // Not this type (or not supported by this browser): try the next.
    }
  }
  return undefined
}

/**
 * What was pasted, as the public key to send (a JWK, or the PEM itself when the browser could not
 * read it) with its type in words; or why it cannot be one.
 * @param {string} text
 * @returns {Promise<PastedKey>}
 */
export async function pastedPublicKey(text) {
  const pasted = String(text).trim()
  if (pasted === "") return { error: `Paste a public key: ${KEY_FORMS}.` }
  if (/PRIVATE KEY/.test(pasted)) {
    return { error: "This is a private key: paste the public key only (-----BEGIN PUBLIC KEY-----). Keep the private key secret." }
  }
  if (pasted.startsWith("{")) {
    let value
    try {
      value = JSON.parse(pasted)
    } catch {
      return { error: `This is not valid JSON: the public key must be ${KEY_FORMS}.` }
    }
    return pastedJwk(value)
  }
  if (/^-----BEGIN PUBLIC KEY-----[\s\S]+-----END PUBLIC KEY-----$/.test(pasted)) {
    const der = pemBytes(pasted)
    if (der === undefined) return { error: "The PEM's body is not base64: paste the whole key, with its BEGIN and END lines." }
    const jwk = await jwkOfSpki(der)
    return jwk === undefined ? { publicKey: pasted, label: "PEM public key" } : { publicKey: jwk, label: keyLabel(jwk) }
  }
  return { error: `The public key must be ${KEY_FORMS}.` }
}
