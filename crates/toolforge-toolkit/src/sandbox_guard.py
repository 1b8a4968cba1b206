# toolforge run_python guard: static check, then execution with restricted builtins.
# Runs inside the isolated child (python3 -I -S -B). The user's code arrives on stdin and never
# runs if the check fails (exit code 3, reason on stderr).
import ast, sys

ALLOWED = {"math", "statistics", "json", "itertools", "collections", "datetime", "re", "random", "textwrap"}
DENIED = {
    "open", "exec", "eval", "compile", "__import__", "getattr", "setattr", "delattr", "globals",
    "locals", "vars", "input", "breakpoint", "help", "memoryview", "type", "object", "super",
    "classmethod", "staticmethod", "property", "dir", "exit", "quit", "copyright", "credits",
    "license", "__builtins__", "__loader__", "__spec__", "bytearray",
}

def check(src):
    try:
        tree = ast.parse(src, "<snippet>", "exec")
    except SyntaxError as e:
        return "syntax error: %s (line %s)" % (e.msg, e.lineno)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] not in ALLOWED or "." in a.name:
                    return "import of %r is not allowed (allowed: %s)" % (a.name, ", ".join(sorted(ALLOWED)))
        elif isinstance(node, ast.ImportFrom):
            if node.level or not node.module or node.module not in ALLOWED:
                return "import from %r is not allowed (allowed: %s)" % (node.module, ", ".join(sorted(ALLOWED)))
            for a in node.names:
                if a.name == "*" or a.name.startswith("_"):
                    return "importing %r is not allowed" % a.name
        elif isinstance(node, ast.Name) and (node.id in DENIED or node.id.startswith("__")):
            return "use of name %r is not allowed" % node.id
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            return "access to attribute %r is not allowed" % node.attr
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            return "global/nonlocal statements are not allowed"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "__" in node.value:
            return "strings containing '__' are not allowed"
    return None

src = sys.stdin.read()
reason = check(src)
if reason:
    sys.stderr.write("rejected: " + reason + "\n")
    sys.exit(3)

import builtins
safe = {k: v for k, v in vars(builtins).items() if k not in DENIED and not k.startswith("_")}
real_import = builtins.__import__
def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level or name not in ALLOWED:
        raise ImportError("import of %r is not allowed" % name)
    return real_import(name, globals, locals, fromlist, level)
safe["__import__"] = guarded_import
safe["__build_class__"] = builtins.__build_class__
safe["__name__"] = "__main__"
code = compile(src, "<snippet>", "exec")
exec(code, {"__builtins__": safe, "__name__": "__main__"})
