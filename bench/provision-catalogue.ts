/**
 * Provisions a big catalogue fast, for start-up and memory measurements (`docs/catalogue-memory.md`):
 * one profile, `CATALOGUE_CREDENTIALS` credentials (default 20,000), two per oauth service, written
 * as an export file and loaded with `service-auth import` (the transfer path: one transaction, the
 * same checks as any import), not 100,000 admin requests.
 *
 *   DATA_DIR=/tmp/big CATALOGUE_CREDENTIALS=100000 npx tsx bench/provision-catalogue.ts
 *   DATABASE_URL=postgres://... CATALOGUE_CREDENTIALS=100000 npx tsx bench/provision-catalogue.ts
 *
 * The target must be empty (a new data directory, or a PostgreSQL database no profile was created
 * in). Secrets are derived from `CATALOGUE_SEED` and the credential's index, so a bench can
 * recompute any of them (`catalogueCredential`) without a file of secrets.
 */
import { execFileSync } from "node:child_process"
import { createHash, createHmac, randomBytes } from "node:crypto"
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
export const PROFILE = "catalogue"
export const ENVIRONMENT = "production"

const derive = (seed: string, what: string, i: number) => createHash("sha256").update(`${seed}/${what}/${i}`).digest()

/** Credential `i` (service `i >> 1`): its client id, secret and service, recomputed from the seed. */
export const catalogueCredential = (seed: string, i: number) => {
  const service = derive(seed, "service", i >> 1).toString("hex")
  return {
    clientId: `svc_${derive(seed, "client", i).toString("hex").slice(0, 32)}`,
    secret: derive(seed, "secret", i).toString("base64url"),
    uuid: `${service.slice(0, 8)}-${service.slice(8, 12)}-4${service.slice(13, 16)}-8${service.slice(17, 20)}-${service.slice(20, 32)}`
  }
}

/** The form body of a token request with credential `i`. */
export const catalogueTokenBody = (seed: string, i: number) => {
  const { clientId, secret, uuid } = catalogueCredential(seed, i)
  return new URLSearchParams({
    grant_type: "client_credentials",
    client_id: clientId,
    client_secret: secret,
    profile: PROFILE,
    environment: ENVIRONMENT,
    service_uuid: uuid
  }).toString()
}

/** The last migration this checkout knows: the export file's `schema_version`. */
const latestMigration = () =>
  Math.max(...readdirSync(join(ROOT, "migrations")).map((name) => Number.parseInt(name, 10)).filter(Number.isFinite))

export const provisionCatalogue = (credentials: number, seed: string, target: Record<string, string>) => {
  const now = new Date().toISOString()
  const digestKey = randomBytes(32).toString("base64url")
  const digest = (secret: string) => createHmac("sha256", Buffer.from(digestKey, "base64url")).update(secret).digest("hex")
  const services = []
  const rows = []
  for (let i = 0; i < credentials; i++) {
    const { clientId, secret, uuid } = catalogueCredential(seed, i)
    if (i % 2 === 0) {
      services.push({
        profile: PROFILE,
        environment: ENVIRONMENT,
        uuid,
        name: `s${i >> 1}`,
        auth_type: "oauth",
        handler: { type: "echo" },
        created_at: now
      })
    }
    rows.push({
      client_id: clientId,
      profile: PROFILE,
      environment: ENVIRONMENT,
      service_uuid: uuid,
      secret_hash: digest(secret),
      created_at: now,
      last_used_at: null,
      deleted_at: null
    })
  }
  const document = {
    format: "service-auth-export",
    version: 2,
    exported_at: now,
    schema_version: latestMigration(),
    tables: {
      profiles: [{ profile: PROFILE, created_at: now }],
      environments: [{ profile: PROFILE, name: ENVIRONMENT, created_at: now }],
      services,
      credentials: rows,
      // The digest key the secrets above are checked with; the server creates its signing keys.
      server_keys: [{ name: "credential_digest_key", value: digestKey, created_at: now }],
      signing_keys: [],
      audit_events: []
    }
  }
  const dir = mkdtempSync(join(tmpdir(), "service-auth-provision-"))
  try {
    const file = join(dir, "catalogue.json")
    writeFileSync(file, JSON.stringify(document), { mode: 0o600 })
    return execFileSync(process.execPath, [join(ROOT, "dist/cli.mjs"), "import", "--in", file], {
      cwd: ROOT,
      env: { ...process.env, ...target },
      encoding: "utf8",
      maxBuffer: 1 << 20
    }).trim()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const credentials = Number(process.env.CATALOGUE_CREDENTIALS ?? 20_000)
  if (!Number.isInteger(credentials) || credentials < 2) throw new Error("CATALOGUE_CREDENTIALS must be an integer >= 2")
  const target = process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : { DATA_DIR: process.env.DATA_DIR ?? "./data" }
  const startedAt = performance.now()
  console.log(provisionCatalogue(credentials, process.env.CATALOGUE_SEED ?? "bench", target))
  console.log(`in ${((performance.now() - startedAt) / 1000).toFixed(1)} s`)
}
