/**
 * PGlite's file system on a private data directory. PGlite's Emscripten file system (`NODEFS`)
 * creates each file with the mode PostgreSQL asks for under Emscripten's own umask (0644 files,
 * 0755 directories) and later `chmod`s some of them itself, so neither the process umask nor a
 * mode set at start keeps what it writes private. This file system masks the group and other bits
 * out of every mode `NODEFS` creates or sets, on this PGlite instance only: each instance has its
 * own Emscripten module, so nothing else in the process is changed.
 */
import type { PGlite } from "@electric-sql/pglite"
import { NodeFS } from "@electric-sql/pglite/nodefs"

const GROUP_AND_OTHER = 0o077

/** What of Emscripten's NODEFS is changed: every mode it creates a file with or sets. */
interface NodeFsModes {
  setattr: (arg: unknown, node: unknown, attr: { mode?: number }, ...rest: Array<unknown>) => void
  node_ops: { mknod: (parent: unknown, name: string, mode: number, dev: number) => unknown }
}

/** Changes this PGlite instance's own Emscripten NODEFS (never node:fs, nothing process-wide). */
const keepPrivate = (emscriptenNodeFs: NodeFsModes): void => {
  const { setattr } = emscriptenNodeFs
  emscriptenNodeFs.setattr = (arg, node, attr, ...rest) =>
    setattr(arg, node, attr.mode === undefined ? attr : { ...attr, mode: attr.mode & ~GROUP_AND_OTHER }, ...rest)
  const { mknod } = emscriptenNodeFs.node_ops
  emscriptenNodeFs.node_ops.mknod = (parent, name, mode, dev) => mknod(parent, name, mode & ~GROUP_AND_OTHER, dev)
}

type EmscriptenOptions = Parameters<NodeFS["init"]>[1]

export class PrivateNodeFs extends NodeFS {
  override async init(pg: PGlite, options: EmscriptenOptions) {
    const { emscriptenOpts } = await super.init(pg, options)
    // Before NodeFS mounts the directory, and so before PostgreSQL writes anything into it.
    const modes = (module: { FS: { filesystems: { NODEFS: NodeFsModes } } }) => keepPrivate(module.FS.filesystems.NODEFS)
    return { emscriptenOpts: { ...emscriptenOpts, preRun: [modes, ...(emscriptenOpts.preRun ?? [])] } }
  }
}
