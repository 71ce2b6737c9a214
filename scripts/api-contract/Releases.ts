/**
 * The released documents kept in the repository (`api/releases/<version>/openapi.yaml`), the
 * package's version, and which release a change is checked against: the newest one not above the
 * package's version. A tag may not travel with a clone; these files do.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"

export interface Version {
  readonly major: number
  readonly minor: number
  readonly patch: number
  readonly text: string
}

export const parseVersion = (text: string): Version | undefined => {
  const match = /^(\d+)\.(\d+)\.(\d+)$/.exec(text)
  return match === null ? undefined : { major: Number(match[1]), minor: Number(match[2]), patch: Number(match[3]), text }
}

export const compareVersions = (a: Version, b: Version): number => a.major - b.major || a.minor - b.minor || a.patch - b.patch

export const packageVersion = (root: string): Version => {
  const text = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version as string
  const version = parseVersion(text)
  if (version === undefined) throw new Error(`package.json: version ${JSON.stringify(text)} is not MAJOR.MINOR.PATCH`)
  return version
}

export const RELEASES_DIR = "api/releases"

/** Every kept release, oldest first. */
export const keptReleases = (root: string): Array<{ readonly version: Version; readonly file: string }> => {
  const dir = join(root, RELEASES_DIR)
  if (!existsSync(dir)) return []
  return readdirSync(dir)
    .map((name) => ({ version: parseVersion(name), file: join(dir, name, "openapi.yaml") }))
    .filter((release): release is { version: Version; file: string } => release.version !== undefined && existsSync(release.file))
    .sort((a, b) => compareVersions(a.version, b.version))
}

/** The release a change is checked against: the newest kept one not above `version`. */
export const baselineFor = (root: string, version: Version) =>
  keptReleases(root).filter((release) => compareVersions(release.version, version) <= 0).at(-1)
