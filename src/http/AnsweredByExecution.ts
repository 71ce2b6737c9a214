/**
 * Set by an HttpApi handler whose answer one of the hot endpoints' executions (`HotEndpoints`) made
 * and recorded: the app's middlewares (`requestMetrics`, `requestLog`) then record it no more.
 */
import { FiberRef } from "effect"

export const answeredByExecution = FiberRef.unsafeMake(false)
