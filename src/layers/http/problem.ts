/**
 * The API's one error body (see `src/api/problem.ts`) as a response, for what answers outside an
 * HttpApi: requests no route takes, the hub's forwarding.
 */
import { HttpServerResponse, ProblemDetails } from "effect/http"
import { problemMembers } from "../../api/problem.ts"

/**
 * A typed error as a response where no HttpApi encodes it (an unmatched route, the hub's
 * forwarding): `encoded` is the error as its schema encodes it, the problem members beside it.
 */
export const problemResponse = (
  error: { readonly _tag: string; readonly message: string },
  encoded: object,
  status: number,
  headers: Readonly<Record<string, string>> = {}
) =>
  HttpServerResponse.text(JSON.stringify({ ...encoded, ...problemMembers(error, status) }), {
    status,
    contentType: ProblemDetails.contentType,
    headers
  })
