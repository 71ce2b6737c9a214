/**
 * The options every admin command takes (`--json`, `--url URL`) are the CLI's global options: a
 * person writes them before the command as often as after it (`service-auth --json services
 * create …`, `service-auth --url https://… profiles list`). @effect/cli reads a command's options
 * only after its name, so those written before it are moved after the command's words, where it
 * reads them; nothing else on the command line moves.
 */

/** The global options, and whether each takes a value. */
const GLOBAL_OPTIONS: ReadonlyMap<string, boolean> = new Map([
  ["--json", false],
  ["--url", true]
])

/** `--url` of `--url=https://…`; the word itself otherwise. */
const optionName = (word: string) => word.split("=")[0]!

/**
 * `argv` (the arguments after the executable) with the global options written before the command's
 * last word moved after it. `subcommands(path)` names the subcommands under a command path
 * (`["service-auth", "credentials"]`), undefined for a command without subcommands.
 */
export const placeGlobalOptions = (
  root: string,
  argv: ReadonlyArray<string>,
  subcommands: (path: ReadonlyArray<string>) => ReadonlyArray<string> | undefined
): Array<string> => {
  const path = [root]
  const words: Array<string> = []
  const moved: Array<string> = []
  for (let index = 0; index < argv.length; index++) {
    const word = argv[index]!
    const names = subcommands(path)
    // Past the command's last word (or `--`): everything stays where it is.
    if (names === undefined || word === "--") {
      words.push(...argv.slice(index))
      break
    }
    const takesValue = GLOBAL_OPTIONS.get(optionName(word))
    if (takesValue !== undefined) {
      moved.push(word)
      if (takesValue && !word.includes("=") && index + 1 < argv.length) moved.push(argv[++index]!)
      continue
    }
    if (names.includes(word)) path.push(word)
    words.push(word)
  }
  return [...words, ...moved]
}

/**
 * The command a command line (its global options placed) names, as far as it names one:
 * `service-auth credentials list` for `credentials list acme …`, `service-auth` for `--nmae`. Where
 * a parse error's pointer to `--help` leads.
 */
export const commandOf = (
  root: string,
  argv: ReadonlyArray<string>,
  subcommands: (path: ReadonlyArray<string>) => ReadonlyArray<string> | undefined
): string => {
  const path = [root]
  for (const word of argv) {
    if (!subcommands(path)?.includes(word)) break
    path.push(word)
  }
  return path.join(" ")
}
