/**
 * Run before every test file (vitest's `setupFiles`). `@effect/vitest`'s `layer(...)` assigns its
 * own `effect`, `scoped` and `layer` onto vitest's shared `it` object, and leaves them there. In a
 * process of its own a file never sees that; the in-process files share worker threads and their
 * loaded modules (`isolate: false`), so a file's `it.layer(...)` or `it.effect(...)` would run on
 * the runtime of whichever file ran before it in that thread: after a `layer(..., {
 * excludeTestServices: true })`, without `TestClock` ("testClock.setTime is not a function"). This
 * puts back the methods `it` had when `@effect/vitest` was first loaded in the thread.
 */
import { it } from "@effect/vitest"

const METHODS = ["effect", "scoped", "live", "scopedLive", "flakyTest", "layer", "prop"] as const
type Methods = Pick<typeof it, (typeof METHODS)[number]>

const PRISTINE = Symbol.for("service-auth/test/pristine-effect-vitest-methods")
const store = globalThis as { [PRISTINE]?: Methods }
// The first file of a thread finds them untouched: no layer has been made yet.
const pristine = (store[PRISTINE] ??= Object.fromEntries(METHODS.map((name) => [name, it[name]])) as unknown as Methods)
Object.assign(it, pristine)
