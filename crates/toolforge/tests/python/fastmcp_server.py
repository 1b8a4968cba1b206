"""A fastmcp server (fastmcp's own venv) behind the gateway, for the SDK client tests.

    python fastmcp_server.py            # stdio

Tools: `divide(a, b)` returns structured output ({"quotient": a / b}) and raises a tool error on
b == 0; `count(steps)` reports progress once per step; `ask_model(question)` samples the
client; `ask_user(question)` elicits a name from the client. The last two ask the way each
protocol era allows: mid-call on a handshake-era connection, an `input_required` result and a
retry on 2026-07-28 (fastmcp 4 has no `ctx.sample`, and its `ctx.elicit` is handshake-era only).
Resource `fixture://greeting`; prompt `greet(name)`.
"""

from pydantic import BaseModel

from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
)

server = FastMCP("fastmcp-fixture")


class Quotient(BaseModel):
    quotient: float


@server.tool
def divide(a: float, b: float) -> Quotient:
    """Divides a by b; a tool error when b is zero."""
    if b == 0:
        raise ToolError("cannot divide by zero")
    return Quotient(quotient=a / b)


@server.tool
async def count(steps: int, ctx: Context) -> str:
    """Reports progress once per step, then says how many steps it counted."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"counted {steps}"


def sampling_request(question: str) -> CreateMessageRequestParams:
    return CreateMessageRequestParams(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=question))],
        max_tokens=16,
    )


NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@server.tool
async def ask_model(question: str, ctx: Context):
    """Asks the calling client's model (sampling) and returns its answer."""
    if ctx._is_modern_protocol():
        answers = ctx.input_responses
        if not answers or "model" not in answers:
            return InputRequiredResult(
                input_requests={"model": CreateMessageRequest(params=sampling_request(question))}
            )
        return f"model said: {answers['model'].content.text}"
    p = sampling_request(question)
    answer = await ctx.session.create_message(
        messages=p.messages, max_tokens=p.max_tokens, related_request_id=ctx.request_id
    )
    return f"model said: {answer.content.text}"


@server.tool
async def ask_user(question: str, ctx: Context):
    """Asks the calling client's user (elicitation) for a name and greets it."""
    if ctx._is_modern_protocol():
        answers = ctx.input_responses
        if not answers or "user" not in answers:
            ask = ElicitRequestFormParams(message=question, requested_schema=NAME_SCHEMA)
            return InputRequiredResult(input_requests={"user": ElicitRequest(params=ask)})
        answer = answers["user"]
        if answer.action != "accept":
            return f"user answered {answer.action}"
        return f"hello {answer.content['name']}"

    class Name(BaseModel):
        name: str

    answer = await ctx.elicit(question, Name)
    if answer.action != "accept":
        return f"user answered {answer.action}"
    return f"hello {answer.data.name}"


@server.resource("fixture://greeting")
def greeting() -> str:
    """A fixed text."""
    return "greetings from fastmcp"


@server.prompt
def greet(name: str) -> str:
    """Asks to greet `name`."""
    return f"Please greet {name} warmly."


if __name__ == "__main__":
    server.run("stdio", show_banner=False)
