package agent

// ProbeSandbox lets the external tests make the sandbox hold, or not.
var ProbeSandbox = &probeSandbox
