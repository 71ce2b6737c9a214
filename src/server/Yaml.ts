/** YAML rendering of the OpenAPI document (the `yaml` package gets YAML's quoting rules right). */
import { stringify } from "yaml"

export const toYaml = (value: unknown): string => stringify(value, { lineWidth: 0, aliasDuplicateObjects: false })
