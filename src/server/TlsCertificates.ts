/**
 * Native TLS (TLS_CERT_FILE, TLS_KEY_FILE): the certificate pair, read and checked, and kept
 * current while the server runs.
 *
 * - `readTlsPair` reads both PEM files (the certificate file may hold the chain after it) and checks
 *   that the key is the certificate's; at start a failure stops the server with its one line.
 * - `watchTlsPair` re-reads the pair on SIGHUP, and when either file changes (polled once a second:
 *   a watcher on the path would lose a file replaced by rename, as certbot and Kubernetes do). A
 *   change is taken once the files have stood still for one poll, so a pair caught half-written is
 *   not refused for nothing. A good pair goes to new connections (`setSecureContext`); connections
 *   already open keep theirs. A bad one is refused with a log line and the old pair stays.
 */
import { createPrivateKey, X509Certificate } from "node:crypto"
import { readFileSync, statSync } from "node:fs"
import { createSecureContext } from "node:tls"
import { describeFileError } from "../config/StartupError.js"

export interface TlsFiles {
  readonly certFile: string
  readonly keyFile: string
}

export interface TlsPair {
  readonly cert: Buffer
  readonly key: Buffer
}

/** Sent with every HTTPS answer: browsers and clients keep to HTTPS for this host for a year. */
export const HSTS = "max-age=31536000"

const readPem = (variable: string, path: string): Buffer | string => {
  try {
    return readFileSync(path)
  } catch (error) {
    return `cannot read ${variable} ${path}: ${describeFileError(error)}`
  }
}

/** The pair, or one line saying what is wrong with it (never the key's contents). */
export const readTlsPair = (files: TlsFiles): TlsPair | string => {
  const cert = readPem("TLS_CERT_FILE", files.certFile)
  if (typeof cert === "string") return cert
  const key = readPem("TLS_KEY_FILE", files.keyFile)
  if (typeof key === "string") return key
  let certificate: X509Certificate
  try {
    certificate = new X509Certificate(cert)
  } catch {
    return `TLS_CERT_FILE ${files.certFile} holds no PEM certificate`
  }
  let privateKey: ReturnType<typeof createPrivateKey>
  try {
    privateKey = createPrivateKey(key)
  } catch {
    return `TLS_KEY_FILE ${files.keyFile} holds no unencrypted PEM private key`
  }
  if (!certificate.checkPrivateKey(privateKey)) {
    return `TLS_CERT_FILE ${files.certFile} and TLS_KEY_FILE ${files.keyFile} do not match (the certificate is for another key)`
  }
  try {
    createSecureContext({ cert, key })
  } catch (error) {
    return `TLS_CERT_FILE ${files.certFile} and TLS_KEY_FILE ${files.keyFile} cannot be used: ${(error as Error).message}`
  }
  return { cert, key }
}

const POLL_MS = 1_000

/** What changes when either file is written or replaced. */
const fingerprint = (files: TlsFiles): string =>
  [files.certFile, files.keyFile].map((path) => {
    try {
      const stat = statSync(path)
      return `${stat.ino}:${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}`
    } catch {
      return "missing"
    }
  }).join("|")

export interface TlsWatchEvents {
  readonly replaced: (pair: TlsPair) => void
  /** `reason` is one line from `readTlsPair`. */
  readonly refused: (reason: string) => void
}

/** Starts watching; the function returned stops it. */
export const watchTlsPair = (files: TlsFiles, events: TlsWatchEvents): () => void => {
  let loaded = fingerprint(files)
  let seen = loaded
  const reload = () => {
    const pair = readTlsPair(files)
    if (typeof pair === "string") events.refused(pair)
    else events.replaced(pair)
  }
  const poll = setInterval(() => {
    const now = fingerprint(files)
    // Taken only once unchanged since the previous poll; a refused pair is not retried until it changes.
    if (now !== loaded && now === seen) {
      loaded = now
      reload()
    }
    seen = now
  }, POLL_MS)
  poll.unref()
  const onHangUp = () => {
    loaded = fingerprint(files)
    seen = loaded
    reload()
  }
  process.on("SIGHUP", onHangUp)
  return () => {
    clearInterval(poll)
    process.off("SIGHUP", onHangUp)
  }
}
