// One tool for both: ESLint's and typescript-eslint's recommended rules find mistakes, and
// `@effect/dprint` (dprint's TypeScript formatter, run as a rule) owns the layout. `npm run lint`
// reports both; `npm run format` writes the layout.
import * as effect from "@effect/eslint-plugin"
import js from "@eslint/js"
import { defineConfig } from "eslint/config"
import globals from "globals"
import tseslint from "typescript-eslint"

export default defineConfig(
  {
    ignores: [
      "dist/",
      "data/",
      // Clients generated from openapi.yaml and kept as released: compiled by the tests, never edited.
      "test/fixtures/"
    ]
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  // Turns off ESLint's own layout rules, then adds the formatter.
  ...effect.configs.dprint,
  {
    languageOptions: { globals: globals.node },
    rules: {
      // The layout the code already has: the Effect team's dprint settings, imports left in the order
      // they are written.
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 140,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force",
          "module.sortImportDeclarations": "maintain",
          "module.sortExportDeclarations": "maintain",
          "importDeclaration.sortNamedImports": "maintain",
          "exportDeclaration.sortNamedExports": "maintain"
        }
      }],
      // `Effect.gen(function*() { return x })` is how an effect without steps is written.
      "require-yield": "off",
      // A `let` assigned once, after a callback that reads it was created (`CommandGroup`).
      "prefer-const": ["error", { ignoreReadBeforeAssign: true }],
      // `any` as a type argument is Effect's idiom for "any instance" (`Command.Command<any, any, any, any>`),
      // and JSON walked by key is `Record<string, any>`; implicit `any` stays an error under `strict`.
      "@typescript-eslint/no-explicit-any": "off",
      // The house style, as in Effect's own code: `Array<A>` and `ReadonlyArray<A>`, never `A[]`.
      "@typescript-eslint/array-type": ["error", { default: "generic", readonly: "generic" }],
      // As `noUnusedLocals`/`noUnusedParameters` in tsconfig.json: a leading `_` marks one kept on purpose.
      "@typescript-eslint/no-unused-vars": ["error", {
        argsIgnorePattern: "^_",
        varsIgnorePattern: "^_",
        caughtErrorsIgnorePattern: "^_",
        destructuredArrayIgnorePattern: "^_"
      }]
    }
  },
  {
    // The profile editor: plain scripts the browser loads as they are.
    files: ["src/web/admin/assets/**/*.js"],
    languageOptions: { globals: globals.browser }
  }
)
