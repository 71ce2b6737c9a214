// Creates or drops a throwaway database on the local PostgreSQL for one CI run.
// Usage: node .ci/pg-database.mjs create|drop NAME   (server from CI_PG_ADMIN_URL)
import pg from "pg"

const [action, name] = process.argv.slice(2)
if (!/^[a-z0-9_]+$/.test(name ?? "") || !["create", "drop"].includes(action)) {
  console.error("usage: node .ci/pg-database.mjs create|drop NAME")
  process.exit(2)
}
const url = process.env.CI_PG_ADMIN_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 })
try {
  await client.connect()
  await client.query(action === "create" ? `CREATE DATABASE ${name}` : `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
} catch (error) {
  console.error(`FATAL: cannot ${action} database ${name} on ${url.replace(/\/\/[^@]*@/, "//")}: ${error.message}`)
  console.error("PostgreSQL must be reachable at 127.0.0.1:5432 (user postgres) for the tests: they are never skipped in CI.")
  process.exit(1)
} finally {
  await client.end().catch(() => {})
}
