// The JavaScript of static/ held to a checker, as the Python is to ruff and mypy (bin/check).
// ESLint's recommended rules (undefined names, unused variables, unreachable code, …) for
// ES modules in the browser; the vendored hls.js is not ours.
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["static/vendor/**", "node_modules/**"] },
  js.configs.recommended,
  {
    files: ["static/**/*.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: { ...globals.browser } },
    rules: {
      eqeqeq: ["error", "always", { null: "ignore" }],
      "no-var": "error",
      "prefer-const": "error",
    },
  },
];
