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
    // On the request path a generator function made per call gets a V8 map of its own, which
    // keeps the function and all it closes over alive until a full collection, so a finished
    // request's objects outlive it: such generators are made once, when the layer is built.
    files: [
      "packages/domain/src/public-api.ts",
      "packages/domain/src/access/**/*.ts",
      "packages/storage-adapter/src/sql/pg-client.ts",
      "packages/storage-adapter/src/repositories/**/*.ts",
      "packages/http-adapter/src/server/**/*.ts"
    ],
    rules: {
      "no-restricted-syntax": ["error", {
        selector: ":function CallExpression[callee.object.name='Effect'][callee.property.name='gen'] > FunctionExpression[generator=true]",
        message: "A generator function made at each call keeps what it closes over alive until a full GC: make it once (Effect.fnUntraced when the layer is built, or a function* declaration)."
      }]
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
