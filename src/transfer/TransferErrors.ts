/** What an export or an import can refuse, each with a message for the operator. */
import { Schema } from "effect"

/** The file cannot be imported: not JSON, not an export, another version, or a row that is not valid. */
export class InvalidExportFile extends Schema.TaggedError<InvalidExportFile>()("InvalidExportFile", {
  message: Schema.String
}) {}

/** The database cannot be exported, or the file cannot be imported into it; nothing was written. */
export class TransferRefused extends Schema.TaggedError<TransferRefused>()("TransferRefused", {
  message: Schema.String
}) {}
