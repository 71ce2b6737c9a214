import { readdirSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"
import { LongestFirst } from "./test/support/LongestFirst.js"

/**
 * Unit and full-stack tests (`npm test`). Browser tests live apart: `vitest.e2e.config.ts`.
 *
 * Two kinds of file, run side by side:
 * - **in-process**: the whole stack in the test's own process (`makeTestServer`, the storage
 *   layers). Most of such a file's CPU used to be loading Effect and the sources again for every
 *   file; these files share worker threads and their loaded modules (`isolate: false`), so each
 *   worker loads them once. A server's pools, ports and caches live in its layers, so files sharing
 *   a worker do not share them. What is still per process, none of it a server's state: Effect's
 *   metric registry (assert on metric changes, not totals; the process metrics count up to the
 *   process's totals), the random pools of request and trace ids, the OpenAPI document once
 *   built, and the tests' fixed signing key.
 * - **processes** (`PROCESS_FILES`): files that start real servers or CLIs, and one that inspects
 *   what a start has loaded (`StartUpWork`). Each gets a fresh process; most of their time is spent
 *   waiting on their children, so four run at once. `test/Layout.test.ts` checks that every file
 *   starting processes is listed here.
 */
export const PROCESS_FILES = [
  "AdminTokens.test.ts",
  "ApiContract.test.ts",
  "CacheCoherenceDeletions.test.ts",
  "CacheCoherenceOutages.test.ts",
  "CacheCoherenceRace.test.ts",
  "Cli.test.ts",
  "CliHelp.test.ts",
  "CliIssuers.test.ts",
  "CliFederatedCredentials.test.ts",
  "CliCredentials.test.ts",
  "CliNewcomer.test.ts",
  "CliPublicKey.test.ts",
  "CliServiceColumns.test.ts",
  "CliTokens.test.ts",
  "ClientErrors.test.ts",
  "DatabaseOutage.test.ts",
  "ExpiryProcesses.test.ts",
  "FastLane.test.ts",
  "GeneratedClient.test.ts",
  "GracefulShutdown.test.ts",
  "HotEndpointEntries.test.ts",
  "HostileTenantConnections.test.ts",
  "IntegratorSnippets.test.ts",
  "JsonLogs.test.ts",
  "KeyEncryption.test.ts",
  "LaneTrace.test.ts",
  "Metrics.test.ts",
  "MultiInstance.test.ts",
  "MultiInstanceAdminTokens.test.ts",
  "MultiInstanceFederation.test.ts",
  "MultiInstanceIntrospection.test.ts",
  "MultiInstanceKeys.test.ts",
  "MultiInstanceRevocation.test.ts",
  "MultiInstanceThrottles.test.ts",
  "NativeTls.test.ts",
  "PrivateDataDir.test.ts",
  "ReadmeWalkthrough.test.ts",
  "ReleasedClients.test.ts",
  "SecretHygiene.test.ts",
  "StartLines.test.ts",
  "StartUp.test.ts",
  "StartUpWork.test.ts",
  "Tracing.test.ts",
  "TracingExporter.test.ts",
  "TransferExport.test.ts",
  "TransferImport.test.ts",
  "TransferMerge.test.ts",
  "TransferIntrospection.test.ts",
  "TransferIssuers.test.ts",
  "TrustedProxies.test.ts",
  "UpstreamAnswers.test.ts",
  "UpstreamConcurrency.test.ts",
  "UpstreamReceives.test.ts",
  "Versions.test.ts"
]
const TEST_DIR = new URL("./test/", import.meta.url)
const files = readdirSync(TEST_DIR).filter((name) => name.endsWith(".test.ts"))
const ownProcess = files.filter((name) => PROCESS_FILES.includes(name))
const shared = files.filter((name) => !ownProcess.includes(name))

export default defineConfig({
  resolve: {
    // The editor's scripts import the server's limits as "./Limits.js", a module the server makes
    // from src/domain/Limits.ts (see tsconfig.editor.json); tests without a server read that file.
    alias: [{ find: /^\.\/Limits\.js$/, replacement: fileURLToPath(new URL("./src/domain/Limits.ts", import.meta.url)) }]
  },
  test: {
    // Deadlines for a hang, not speed limits: a busy machine runs several times slower (at a load
    // average of 40 an embedded database's layer took over 120 s to build, a test of 20 racing
    // writes over 60 s).
    testTimeout: 120_000,
    hookTimeout: 300_000,
    globalSetup: ["test/support/BuildServer.ts"],
    // Before each file: @effect/vitest's `layer` leaves its methods on vitest's shared `it`, which
    // files sharing a thread would otherwise inherit from one another (see the file).
    setupFiles: ["test/support/EffectVitestReset.ts"],
    // The longest files start first, whatever their size (see the file).
    sequence: { sequencer: LongestFirst },
    // Pool sizes and whether a worker is reused are read from here, not from a project: each pool
    // is made once for the run. Only the in-process project uses threads.
    poolOptions: {
      // Two threads for two cores: these files are CPU-bound; a thread keeps its modules across files.
      threads: { maxThreads: 2, minThreads: 1, isolate: false },
      // Four files at a time, though the machine may have two cores: most of such a file's time
      // is spent waiting on the servers and CLIs it starts.
      forks: { maxForks: 4, minForks: 1 }
    },
    projects: [
      {
        extends: true,
        test: {
          name: "in-process",
          include: shared.map((name) => `test/${name}`),
          pool: "threads",
          isolate: false
        }
      },
      {
        extends: true,
        test: {
          name: "processes",
          include: ownProcess.map((name) => `test/${name}`),
          pool: "forks",
          isolate: true
        }
      }
    ]
  }
})
