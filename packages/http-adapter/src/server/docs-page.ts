import type { PublicApiEnvironment } from "@clinical-api/domain"
import { Option } from "effect"
import type { HttpApiScalar } from "effect/http-api"
import { BEARER_SCHEME } from "../api/openapi.js"

/** What the service says of itself at `/openapi.json` and `/docs`. */
export interface Publication {
  /** PUBLIC_BASE_URL: the URL partners reach the service at; without it, the address it listens on. */
  readonly publicBaseUrl: Option.Option<string>
  readonly environment: PublicApiEnvironment
  /** The key the docs page fills in for "Test Request" (the sandbox data's, printed in the start-up banner). */
  readonly sandboxKey: Option.Option<string>
}

/**
 * Scalar's options beyond what `HttpApiScalar.ScalarConfig` declares (Scalar 1.43, bundled by
 * effect 4.1); the page passes the whole object to Scalar as it is.
 */
interface ScalarOptions extends HttpApiScalar.ScalarConfig {
  readonly hideClientButton: boolean
  readonly showDeveloperTools: "never"
  readonly telemetry: boolean
  readonly documentDownloadType: "json"
  readonly servers?: ReadonlyArray<{ readonly url: string; readonly description: string }>
  readonly authentication?: {
    readonly preferredSecurityScheme: string
    readonly securitySchemes?: { readonly [scheme: string]: { readonly token: string } }
  }
}

/**
 * Scalar's own links out of the page: its "Powered by Scalar" footer is hidden, and the status
 * of a response no longer opens its MDN page.
 */
const OUTSIDE_LINKS_OFF = `a[href^="https://www.scalar.com"] { display: none; }
a[href^="https://developer.mozilla.org/"] { pointer-events: none; text-decoration: none; cursor: default; }`

/** The path the service is served under at its public URL: the page's requests stay on the page's origin. */
const pathOf = (publicBaseUrl: Option.Option<string>) =>
  Option.match(publicBaseUrl, { onNone: () => "/", onSome: (url) => new URL(url).pathname })

/**
 * The docs page's Scalar options. Nothing on the page reaches an outside service: no web fonts,
 * no telemetry, no "Open API Client" (client.scalar.com), no developer tools, no links out. In the
 * sandbox "Test Request" sends to the service the page was loaded from (a relative server: the
 * page's own origin, whatever name it was opened under) with the sandbox key filled in. In
 * production the page only documents: no key and no "Test Request", so nothing on it calls
 * production data.
 */
export const docsPageOptions = (publication: Publication): HttpApiScalar.ScalarConfig => {
  const common = {
    withDefaultFonts: false,
    defaultOpenAllTags: true,
    hideClientButton: true,
    showDeveloperTools: "never",
    telemetry: false,
    documentDownloadType: "json",
    customCss: OUTSIDE_LINKS_OFF
  } as const
  const options: ScalarOptions = publication.environment === "production"
    ? { ...common, hideTestRequestButton: true }
    : {
      ...common,
      hideTestRequestButton: false,
      servers: [{ url: pathOf(publication.publicBaseUrl), description: "This service" }],
      authentication: {
        preferredSecurityScheme: BEARER_SCHEME,
        ...Option.match(publication.sandboxKey, {
          onNone: () => ({}),
          onSome: (token) => ({ securitySchemes: { [BEARER_SCHEME]: { token } } })
        })
      }
    }
  return options
}
