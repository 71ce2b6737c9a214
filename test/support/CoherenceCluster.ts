/**
 * The cache coherence run's cluster: three real `npm start` processes on a PostgreSQL database of
 * their own (on the server of TEST_DATABASE_URL: a deletion waits for every live lease in its
 * database, and the servers of other test files, some of them frozen or cut off on purpose, must not
 * hold one here), and a fourth whose database connections go through a TCP proxy that a test can
 * stall or cut. Called inside a `describe`: it registers that block's hooks, which leave every process
 * running and the database reachable after each test. Also what a test needs to find these
 * processes' connections in /proc.
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs"
import { afterAll, afterEach, beforeAll } from "vitest"
import { ADMIN_TOKEN, addCredential, createProfile, createService, type Instance } from "./CoherenceRequests.js"
import { freshDatabase } from "./Databases.js"
import { startServer } from "./ServerProcess.js"
import { startTcpProxy, type TcpProxy } from "./TcpProxy.js"

/**
 * The local ports of the TCP connections process `pid` holds to `remotePort`: its socket file
 * descriptors matched by inode in /proc/net/tcp{,6}. PostgreSQL knows them as `client_port`, so the
 * test can kill exactly these instances' connections, whatever application_name each connection
 * uses, and none of the other test files' servers sharing the database.
 */
export const tcpClientPorts = (pid: number, remotePort: number): Array<number> => {
  const inodes = new Set<string>()
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))
      if (match !== null) inodes.add(match[1]!)
    } catch {
      /* closed meanwhile */
    }
  }
  return establishedConnections()
    .filter((connection) => connection.peerPort === remotePort && inodes.has(connection.inode))
    .map((connection) => connection.localPort)
}

/** The established TCP connections of this host, from /proc/net/tcp{,6}. */
const establishedConnections = () => {
  const connections: Array<{ localPort: number; peerPort: number; received: number; inode: string }> = []
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = ""
    try {
      text = readFileSync(table, "utf8")
    } catch {
      continue
    }
    for (const line of text.split("\n").slice(1)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const fields = line.trim().split(/\s+/)
      if (fields.length < 10 || fields[3] !== "01" /* ESTABLISHED */) continue
      connections.push({
        localPort: parseInt(fields[1]!.split(":")[1]!, 16),
        peerPort: parseInt(fields[2]!.split(":")[1]!, 16),
        received: parseInt(fields[4]!.split(":")[1]!, 16),
        inode: fields[9]!
      })
    }
  }
  return connections
}

/** How many connections to the server listening on `port` hold bytes it has not read yet. */
export const unreadConnections = (port: number) =>
  establishedConnections().filter((connection) => connection.localPort === port && connection.received > 0).length

/** The running cluster, once the block's `beforeAll` has run. */
export interface Cluster {
  instances: Array<Instance>
  /** A fourth instance whose database connections go through `proxy`. */
  cutOff: Instance
  proxy: TcpProxy
}

/** The cluster of a describe block, and `buildPair` on it. */
export const coherenceCluster = () => {
  const cluster: Cluster = { instances: [], cutOff: undefined!, proxy: undefined! }
  let database: Awaited<ReturnType<typeof freshDatabase>> | undefined

  const env = (databaseUrl: string) => ({
    DATABASE_URL: databaseUrl,
    ADMIN_TOKEN,
    // One public name for the cluster, as deployed behind a load balancer.
    ISSUER: "http://service-auth.test",
    // Refused token requests of deleted credentials must stay 401, not turn into 429s.
    AUTH_FAILURE_LIMIT: "100000"
  })

  /** Every server's node process, resumed: nothing is ever left stopped. */
  const resumeAll = () => {
    for (const instance of [...cluster.instances, cluster.cutOff]) {
      try {
        if (instance !== undefined) process.kill(instance.server.serverPid(), "SIGCONT")
      } catch {
        /* already gone */
      }
    }
  }

  beforeAll(async () => {
    database = await freshDatabase()
    const target = new URL(database.url)
    cluster.proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port === "" ? "5432" : target.port) })
    const proxied = new URL(database.url)
    proxied.hostname = "127.0.0.1"
    proxied.port = String(cluster.proxy.port)
    // Started together: they race to migrate and to create the shared keys, as a rollout does.
    const started = await Promise.allSettled([
      startServer(env(database.url)),
      startServer(env(database.url)),
      startServer(env(database.url)),
      startServer(env(proxied.toString()))
    ])
    const servers = started.flatMap((result) => (result.status === "fulfilled" ? [result.value] : []))
    const failed = started.find((result): result is PromiseRejectedResult => result.status === "rejected")
    if (failed !== undefined) {
      await Promise.all(servers.map((server) => server.stop(5_000)))
      throw failed.reason
    }
    cluster.instances = servers.slice(0, 3).map((server, i) => ({ name: `instance ${"abc"[i]}`, server }))
    cluster.cutOff = { name: "instance d (behind the proxy)", server: servers[3]! }
  }, 120_000)

  afterEach(() => {
    // Whatever a test did, the next one starts with every process running and the database reachable.
    resumeAll()
    cluster.proxy?.restore()
  })

  afterAll(async () => {
    resumeAll()
    try {
      const all = [...cluster.instances, ...(cluster.cutOff === undefined ? [] : [cluster.cutOff])]
      const codes = await Promise.all(all.map((instance) => instance.server.stop(10_000)))
      codes.forEach((code, i) => {
        if (code !== 0) console.error(`${all[i]!.name} exited with ${code}:\n${all[i]!.server.log()}`)
      })
    } finally {
      await cluster.proxy?.close()
      await database?.drop()
    }
  }, 60_000)

  /** A fresh profile with one `oauth` service and two credentials: A (to be deleted) and B (a bystander). */
  const buildPair = async (via: Instance) => {
    const profile = await createProfile(via, ["prod"])
    const service = await createService(via, profile, "prod")
    const a = await addCredential(via, service, "A")
    const b = await addCredential(via, service, "B")
    return { profile, service, a, b }
  }
  return { cluster, buildPair }
}
