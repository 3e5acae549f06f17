/**
 * The HTTP edge's error writing. The error shape (`Problem`), the edge's own failures and `answerFor` — what
 * the API answers for a failure — are part of the description (`@factline/core/api`, api/Problem.ts), which
 * the derived client reads too. Handlers and middleware never pick a status: their program fails with a
 * member of core's failure family, and the edge (Serve.ts) writes it with `answerFor`.
 */
import { Problem as Described } from "@factline/core/api"

export const { Problem, Unauthorized, Forbidden, RateLimited, RequestRefused, Answered, answerFor, noSniff } = Described
export type Problem = Described.Problem
export type Unauthorized = Described.Unauthorized
export type Forbidden = Described.Forbidden
export type RateLimited = Described.RateLimited
export type RequestRefused = Described.RequestRefused
export type Answered = Described.Answered
export type Answer = Described.Answer
