//! The built-in `evals` MCP server: the LLM-evaluation tools of seed 003 (list_models, complete,
//! react_step, judge, drift, variants and trajectories) plus `grade_selection`.
