/**
 * The Pi and OMP adapter (P5): `pi --mode rpc` or `omp --mode rpc`, chosen by `variant`.
 *
 * @module
 */
export { layer, makePiClient, type PiProviderOptions } from "../../layers/providers/pi/PiProvider.ts"
