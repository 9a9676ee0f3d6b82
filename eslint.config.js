import js from "@eslint/js"
import tseslint from "typescript-eslint"

export default tseslint.config(
  { ignores: ["**/node_modules/**", "**/build/**", "**/dist/**", "**/coverage/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      "no-console": "off"
    }
  },
  {
    // The domain is pure: it names ports, it never reaches a driver, a server or the file system.
    files: ["packages/domain/src/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", {
        patterns: [
          { regex: "^(?!effect($|/)|node:crypto$|node:zlib$|\\.{1,2}/).*", message: "packages/domain depends on effect alone (plus node:crypto/node:zlib for HMAC and CRC-32)." }
        ]
      }]
    }
  }
)
