import { defineConfig } from "vitest/config"

/**
 * Browser tests of the profile editor (`npm run test:e2e`): real Chromium (playwright-core) against
 * the real server started as a child process. Kept apart from the unit tests (`npm test`).
 */
export default defineConfig({
  test: {
    include: ["test/e2e/**/*.e2e.ts"],
    // Deadlines for a hang: one test is a dozen browser actions, each allowed 30 s (setDefaultTimeout).
    testTimeout: 180_000,
    hookTimeout: 120_000,
    fileParallelism: false,
    pool: "forks",
    globalSetup: ["test/support/BuildServer.ts"],
    reporters: ["verbose"]
  }
})
