import { defineConfig } from "vitest/config"

/** The real-CLI tests (`npm run test:agents`): the pinned agent CLIs, each driven by a fake model on loopback. */
export default defineConfig({
  test: {
    include: ["test/agents/**/*.agents.test.ts"],
    testTimeout: 180_000,
    hookTimeout: 60_000,
    teardownTimeout: 10_000,
    // Tests are quiet unless they fail: what a test logs (Effect's logger, console) is shown only
    // for a test that fails (`npx vitest run --silent=false …` shows every test's).
    silent: "passed-only"
  }
})
