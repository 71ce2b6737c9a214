/**
 * Optic's breaking-change rules (`optic diff A B --check`, @useoptic/optic from npm): removed
 * operations, removed response members, removed or added enum values, response types expanded,
 * request unions that no longer overlap, required request members added. Run with its telemetry
 * off; the documents are compared as files, never through git or a cloud.
 */
import { execFile } from "node:child_process"
import { join } from "node:path"
import { promisify } from "node:util"

const run = promisify(execFile)

export interface OpticResult {
  readonly breaking: boolean
  /** Each rule that failed, as Optic words it. */
  readonly findings: Array<string>
  readonly output: string
}

export const opticDiff = async (root: string, releasedFile: string, currentFile: string): Promise<OpticResult> => {
  const bin = join(root, "node_modules/.bin/optic")
  const env = { ...process.env, OPTIC_TELEMETRY_LEVEL: "off", NO_COLOR: "1", FORCE_COLOR: "0" }
  const output = await run(bin, ["diff", releasedFile, currentFile, "--check", "--severity", "error"], {
    cwd: root,
    env,
    maxBuffer: 64 * 1024 * 1024
  }).then(
    ({ stdout, stderr }) => ({ code: 0, text: `${stdout}${stderr}` }),
    (error: { code?: number; stdout?: string; stderr?: string }) => ({
      code: typeof error.code === "number" ? error.code : 2,
      text: `${error.stdout ?? ""}${error.stderr ?? String(error)}`
    })
  )
  // eslint-disable-next-line no-control-regex
  const plain = output.text.replace(/\u001b\[[0-9;]*m/g, "")
  const findings = plain.split("\n").map((line) => line.trim()).filter((line) => /^x \[/.test(line))
  if (output.code !== 0 && findings.length === 0) {
    throw new Error(`optic diff failed without a finding (exit ${output.code}):\n${plain}`)
  }
  return { breaking: output.code !== 0, findings, output: plain }
}
