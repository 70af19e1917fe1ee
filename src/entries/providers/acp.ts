/**
 * The ACP adapter (P6): any agent that speaks the Agent Client Protocol over stdio. This entry
 * loads the optional peer dependencies `@agentclientprotocol/sdk` and `zod`; install them to use it.
 *
 * @module
 */
export { type AcpProviderOptions, layer, makeAcpClient } from "../../layers/providers/acp/AcpProvider.ts"
