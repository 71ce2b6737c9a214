/** Resident memory of processes, read from Linux's /proc; for the benches' reports. */
import { readFileSync } from "node:fs"

/** The resident memory of `pids` together, in MB; a process gone meanwhile counts nothing. */
export const residentMb = (pids: ReadonlyArray<number>): number =>
  pids.reduce((sum, pid) => {
    try {
      const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))
      return sum + Number(line?.split(/\s+/)[1] ?? 0) / 1024
    } catch {
      return sum
    }
  }, 0)
