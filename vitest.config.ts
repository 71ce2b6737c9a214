import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

/** Unit and full-stack tests (`npm test`). Browser tests live apart: `vitest.e2e.config.ts`. */
export default defineConfig({
  resolve: {
    // The editor's scripts import the server's limits as "./Limits.js", a module the server makes
    // from src/domain/Limits.ts (see tsconfig.editor.json); tests without a server read that file.
    alias: [{ find: /^\.\/Limits\.js$/, replacement: fileURLToPath(new URL("./src/domain/Limits.ts", import.meta.url)) }]
  },
  test: {
    include: ["test/**/*.test.ts"],
    exclude: ["test/e2e/**", "node_modules/**"],
    // Deadlines for a hang, not speed limits: a busy machine runs several times slower (at a load
    // average of 40 an embedded database's layer took over 120 s to build, a test of 20 racing
    // writes over 60 s).
    testTimeout: 120_000,
    hookTimeout: 300_000,
    pool: "forks",
    // Four files at a time, though the machine may have two cores: most of a full-stack file's time
    // is spent waiting on the servers and CLIs it starts (vitest's default on two cores is one at a
    // time: 11 minutes instead of 7).
    poolOptions: { forks: { maxForks: 4, minForks: 1 } },
    globalSetup: ["test/support/BuildServer.ts"]
  }
})
