import tseslint from "typescript-eslint";
export default [{ files: ["**/*.ts"], languageOptions: { parser: tseslint.parser }, rules: { "max-lines-per-function": ["warn", { max: 80, skipBlankLines: true, skipComments: true }] } }];
