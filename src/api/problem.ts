/**
 * One error body over the whole API: an RFC 9457 problem (`application/problem+json`) whose
 * standard members say what happened to a person (`title`, `detail`, `status`) and whose `type`
 * and `_tag` say which typed error it is; the error's own fields (`agentId`, `turnId`, …) are
 * members beside them. Requests the API cannot take (an invalid body, an unknown route: see
 * requestErrors.ts) are typed errors too, with the same shape. The server's own answers outside
 * an HttpApi are built from the same members (`layers/http/problem.ts`).
 */
import { Effect, Schema, SchemaTransformation } from "effect"
import { ProblemDetails } from "effect/http"
import { HttpApiSchema } from "effect/http-api"

/** The problem type of a typed error: `urn:quiesce:error:<tag>`. */
export const problemType = (tag: string) => `urn:quiesce:error:${tag}`

/** "AgentNotFound" → "Agent not found". */
const titleOf = (tag: string) => {
  const words = tag.replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase()
  return words.charAt(0).toUpperCase() + words.slice(1)
}

/** The problem members of a typed error's body. */
export const problemMembers = (error: { readonly _tag: string; readonly message: string }, status: number) => ({
  type: problemType(error._tag),
  title: titleOf(error._tag),
  status,
  detail: error.message,
  _tag: error._tag
})

/** What every error body has; the OpenAPI document declares it for every error of every operation. */
const ProblemBody = Schema.StructWithRest(
  Schema.Struct({
    type: Schema.String.check(Schema.isPattern(/^urn:quiesce:error:[A-Za-z]+$/u)),
    title: Schema.String,
    status: Schema.Int,
    detail: Schema.String,
    _tag: Schema.String,
    message: Schema.String
  }),
  [Schema.Record(Schema.String, Schema.Unknown)]
)

/** The error answers with `status`, its body a problem; a generated client decodes it back to the error. */
export const asProblem = (status: number) =>
<S extends Schema.Codec<{ readonly _tag: string; readonly message: string }, { readonly _tag: string; readonly message: string }>>(self: S) =>
  ProblemBody.pipe(
    Schema.decodeTo(
      Schema.toType(self),
      SchemaTransformation.transformEffect({
        decode: (body) => Schema.decodeUnknownEffect(self)(body).pipe(Effect.mapError((error) => error.issue)),
        encode: (error) =>
          Schema.encodeEffect(self)(error).pipe(
            Effect.map((encoded) => ({ ...encoded, ...problemMembers(error, status) })),
            Effect.mapError((failure) => failure.issue)
          )
      })
    ),
    HttpApiSchema.status(status),
    HttpApiSchema.asJson({ contentType: ProblemDetails.contentType })
  )
