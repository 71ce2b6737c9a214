/**
 * The order files start in (`vitest.config.ts`'s `sequence.sequencer`): the files that take longest
 * first, so that none of them starts late and becomes the run's tail while the other workers sit
 * idle. vitest orders by the last run's durations when it has them (a second run in the same
 * clone), otherwise by file size, and size says little here: a 130-line file that runs the API
 * checker five times took longest of all. The list is measured (the longest files of a whole run,
 * longest first); files not on it follow in vitest's order.
 */
import { basename } from "node:path"
import { BaseSequencer, type TestSpecification } from "vitest/node"

export const LONGEST_FILES = [
  "ApiContract.test.ts",
  "CliCredentials.test.ts",
  "Cli.test.ts",
  "ReleasedClients.test.ts",
  "Federation.test.ts",
  "TokenStandingAgreement.test.ts",
  "CliTokens.test.ts",
  "TransferImport.test.ts",
  "CliServiceColumns.test.ts",
  "IntegratorSnippets.test.ts",
  "HostileTenantInput.test.ts",
  "PrivateKeyJwt.test.ts",
  "TransferExport.test.ts",
  "UnstorableText.test.ts",
  "TokenIntrospection.test.ts",
  "TransferMerge.test.ts",
  "TracingExporter.test.ts",
  "KeyRotation.test.ts",
  "StartUp.test.ts",
  "CliNewcomer.test.ts",
  "ReadmeTypeScript.test.ts"
]

const rank = (spec: TestSpecification) => {
  const index = LONGEST_FILES.indexOf(basename(spec.moduleId))
  return index === -1 ? LONGEST_FILES.length : index
}

export class LongestFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const sorted = await super.sort(files)
    // Array.prototype.sort is stable: the files off the list keep vitest's order.
    return sorted.sort((a, b) => rank(a) - rank(b))
  }
}
