# Builds evals/golden_tasks.jsonl: every case is written out by hand here (prompt, the tool the
# model called, its arguments, the session, and the expected decision). Run from anywhere:
#   python3 evals/build_golden_tasks.py
# The cosine-similarity labels were checked by reading each prompt against the two descriptions:
# each prompt paraphrases the winner's description (see evals/README.md).
import json
import os
cases=[]
def case(id, prompt, server, tool, args, exp_server, exp_tool, rule, alts, session=None):
    c={"id":id,"prompt":prompt,"tool_call":{"server":server,"tool":tool,"arguments":args}}
    if session: c["session"]=[{"server":a,"tool":b} for a,b in session]
    c["expected"]={"server":exp_server,"tool":exp_tool,"selection_rule":rule,"alternatives":alts}
    cases.append(c)

FS=("filesystem","read_file"); GH=("github","get_file_contents")
FSW=("filesystem","write_file"); GHW=("github","create_or_update_file")
GHB=("github","create_branch"); GITB=("git","git_create_branch")
GHL=("github","list_commits"); GITL=("git","git_log")
FSS=("filesystem","search_files"); GHS=("github","search_code"); MEM=("memory","search_nodes")
fs_args={"path":"README.md"}
gh_args={"owner":"anthropics","repo":"anthropic-sdk-python","path":"SECURITY.md"}
# --- seed 000's two examples, verbatim
case("ambig-mention-001","Use the filesystem server to read README.md",*FS,{"path":"README.md"},*FS,"explicit-mention",["github"])
case("ambig-mention-002","On github, read the file SECURITY.md from owner anthropics repo anthropic-sdk-python",*GH,gh_args,*GH,"explicit-mention",["filesystem"])
# --- explicit-mention: names, aliases, case, whichever tool the model called
em=[
 ("mention-003","Read docs/intro.md with the FILESYSTEM tools",GH,{"path":"docs/intro.md"},FS,["github"]),
 ("mention-004","Using fs, open notes.txt",GH,{"path":"notes.txt"},FS,["github"]),
 ("mention-005","gh: show me CONTRIBUTING.md in octo/hello",FS,{"owner":"octo","repo":"hello","path":"CONTRIBUTING.md"},GH,["filesystem"]),
 ("mention-006","Fetch LICENSE from GitHub for acme/widgets",FS,{"owner":"acme","repo":"widgets","path":"LICENSE"},GH,["filesystem"]),
 ("mention-007","From my local files read the config",GH,{"path":"config.toml"},FS,["github"]),
 ("mention-008","read the file via GitHub please",FS,{},GH,["filesystem"]),
 ("mention-009","Use the files server and print todo.md",FS,{"path":"todo.md"},FS,["github"]),
 ("mention-010","Write hello.txt on the filesystem",GHW,{"path":"hello.txt","content":"hi"},FSW,["github"]),
 ("mention-011","Commit a new README to github in acme/site on main",FSW,{"path":"README.md","content":"x"},GHW,["filesystem"]),
 ("mention-012","Save out.json with fs",GHW,{"path":"out.json","content":"{}"},FSW,["github"]),
 ("mention-013","Create branch feature-x with git in /srv/app",GHB,{"repo_path":"/srv/app","branch_name":"feature-x"},GITB,["github"]),
 ("mention-014","Create branch feature-x on github for acme/app",GITB,{"owner":"acme","repo":"app","branch":"feature-x"},GHB,["git"]),
 ("mention-015","Use gh to make a release branch",GITB,{},GHB,["git"]),
 ("mention-016","Show the git history of /srv/app",GHL,{"repo_path":"/srv/app"},GITL,["github"]),
 ("mention-017","List the latest commits on GitHub for acme/app",GITL,{"owner":"acme","repo":"app"},GHL,["git"]),
 ("mention-018","Search my memory for Alice",GHS,{"query":"Alice"},MEM,["filesystem","github"]),
 ("mention-019","Search github for TODO markers",MEM,{"q":"TODO"},GHS,["filesystem","memory"]),
 ("mention-020","Find *.rs files on the filesystem",MEM,{"path":".","pattern":"*.rs"},FSS,["github","memory"]),
 ("mention-021","Look it up in the kg: who is Bob?",FSS,{"query":"Bob"},MEM,["filesystem","github"]),
 ("mention-022","fs search for Cargo.toml",GHS,{"path":".","pattern":"Cargo.toml"},FSS,["github","memory"]),
 ("mention-023","In Git, branch off main as hotfix",GHB,{"repo_path":".","branch_name":"hotfix","base_branch":"main"},GITB,["github"]),
 ("mention-024","Read README.md (filesystem)",GH,{"path":"README.md"},FS,["github"]),
 ("mention-025","github.com/acme/app: get package.json",FS,{"owner":"acme","repo":"app","path":"package.json"},GH,["filesystem"]),
 ("mention-026","Search the knowledge-graph for projects",GHS,{"query":"projects"},MEM,["filesystem","github"]),
]
for id,p,called,args,exp,alts in em:
    case(id,p,*called,args,*exp,"explicit-mention",alts)
# --- argument-type: no server named; exactly one schema validates
at=[
 ("argtype-001","Read README.md",GH,{"path":"README.md"},FS,["github"]),
 ("argtype-002","Open the changelog",GH,{"path":"CHANGELOG.md","head":20},FS,["github"]),
 ("argtype-003","Read SECURITY.md from the repo",FS,{"owner":"o","repo":"r","path":"SECURITY.md","head":5},FS,["github"]),
 ("argtype-004","Overwrite notes.txt",GHW,{"path":"notes.txt","content":"new"},FSW,["github"]),
 ("argtype-005","Create branch feat",GHB,{"repo_path":"/srv/app","branch_name":"feat"},GITB,["github"]),
 ("argtype-006","Create branch feat for the team",GITB,{"owner":"acme","repo":"app","branch":"feat"},GHB,["git"]),
 ("argtype-007","Create branch feat everywhere",GHB,{"owner":"acme","repo":"app","branch":"feat","repo_path":".","branch_name":"feat"},GITB,["github"]),
 ("argtype-008","Show recent commits",GHL,{"repo_path":"/srv/app","max_count":5},GITL,["github"]),
 ("argtype-009","Show recent commits of the project",GITL,{"owner":"acme","repo":"app"},GHL,["git"]),
 ("argtype-010","Show recent commits on main",GITL,{"owner":"acme","repo":"app","sha":"main","perPage":10},GHL,["git"]),
 ("argtype-011","Find all markdown documents",GHS,{"path":".","pattern":"*.md"},FSS,["github","memory"]),
 ("argtype-012","Find code that calls unwrap",FSS,{"q":"unwrap language:rust"},GHS,["filesystem","memory"]),
 ("argtype-013","Who is Carol?",FSS,{"query":"Carol"},MEM,["filesystem","github"]),
 ("argtype-014","Look up Dave",GHS,{"query":"Dave","q":"Dave"},MEM,["filesystem","github"]),
 ("argtype-015","Find tests",MEM,{"path":"tests","pattern":"*_test.py","excludePatterns":["node_modules"]},FSS,["github","memory"]),
 ("argtype-016","Read the fsck log",GH,{"path":"/var/log/fsck.log"},FS,["github"]),
 ("argtype-017","Read the ghost story",GH,{"path":"ghost.txt"},FS,["github"]),
 ("argtype-018","Check the gitignore",GH,{"path":".gitignore"},FS,["github"]),
 ("argtype-019","Use git and github to create branch x",GHB,{"repo_path":".","branch_name":"x"},GITB,["github"]),
 ("argtype-020","Use fs or gh, whichever, to read a.txt",GH,{"path":"a.txt"},FS,["github"]),
 ("argtype-021","Store docs/index.md with a message",GHW,{"path":"docs/index.md","content":"x","message":"docs"},FSW,["github"]),
 ("argtype-022","Read lines 1-10 of main.rs",GH,{"path":"src/main.rs","head":10,"tail":0},FS,["github"]),
]
for id,p,called,args,exp,alts in at:
    case(id,p,*called,args,*exp,"argument-type",alts)
# --- session-recency: no mention, several (or no) schemas validate, an earlier call in the group decides
sr=[
 ("recency-001","Now read SECURITY.md too",FS,gh_args,[GH],GH,["filesystem"]),
 ("recency-002","And the next file please",GH,gh_args,[FS],FS,["github"]),
 ("recency-003","Again for CHANGELOG.md",FS,{"owner":"o","repo":"r","path":"CHANGELOG.md"},[FS,GH],GH,["filesystem"]),
 ("recency-004","Again for CHANGELOG.md",GH,{"owner":"o","repo":"r","path":"CHANGELOG.md"},[GH,FS],FS,["github"]),
 ("recency-005","Once more",FS,{},[GH,("time","get_current_time")],GH,["filesystem"]),
 ("recency-006","Save it as well",FSW,{"owner":"o","repo":"r","path":"a.md","content":"x","message":"m","branch":"main"},[GHW],GHW,["filesystem"]),
 ("recency-007","Save the other one",GHW,{},[FSW],FSW,["github"]),
 ("recency-008","Another branch",GHB,{},[GITB],GITB,["github"]),
 ("recency-009","Another branch",GITB,{},[GHB],GHB,["git"]),
 ("recency-010","More history",GHL,{},[GITL,("git","git_status")],GITL,["github"]),
 ("recency-011","More history",GITL,{},[GITL,GHL],GHL,["git"]),
 ("recency-012","Search again",FSS,{},[MEM],MEM,["filesystem","github"]),
 ("recency-013","Search again",MEM,{},[MEM,GHS],GHS,["filesystem","memory"]),
 ("recency-014","Search again",GHS,{},[GHS,FSS],FSS,["github","memory"]),
 ("recency-015","Read the next one",GH,{"owner":"o","repo":"r","path":"b.md","branch":"dev"},[GH,("github","create_issue")],GH,["filesystem"]),
 ("recency-016","Read it again",FS,{},[FS,("github","create_branch")],FS,["github"]),
]
for id,p,called,args,sess,exp,alts in sr:
    case(id,p,*called,args,*exp,"session-recency",alts,session=sess)
# --- single-candidate: tools in no overlap group
sc=[
 ("single-001","What time is it in Tokyo?",("time","get_current_time"),{"timezone":"Asia/Tokyo"}),
 ("single-002","Convert 9:00 Paris time to New York",("time","convert_time"),{"source_timezone":"Europe/Paris","time":"09:00","target_timezone":"America/New_York"}),
 ("single-003","Fetch https://example.com",("fetch","fetch"),{"url":"https://example.com"}),
 ("single-004","Remember that Alice likes tea",("memory","create_entities"),{"entities":[]}),
 ("single-005","What changed in the working tree?",("git","git_status"),{"repo_path":"."}),
 ("single-006","List the folder src",("filesystem","list_directory"),{"path":"src"}),
 ("single-007","Open an issue about the crash",("github","create_issue"),{"owner":"o","repo":"r","title":"crash"}),
 ("single-008","Use github to read a file",("filesystem","read_text_file"),{"path":"a.txt"}),
 ("single-009","Show the diff",("git","git_diff_unstaged"),{"repo_path":"."}),
 ("single-010","Merge PR 7",("github","merge_pull_request"),{"owner":"o","repo":"r","pull_number":7}),
 ("single-011","Show me the whole graph",("memory","read_graph"),{}),
 ("single-012","Make a directory build",("filesystem","create_directory"),{"path":"build"}),
]
for id,p,called,args in sc:
    case(id,p,*called,args,*called,"single-candidate",[])
# --- cosine-similarity / priority-order: no mention, no deciding schema, no session; labels filled after review
cp=[
 ("similar-001","Get the contents of a file or directory from the remote repository",FS,gh_args),
 ("similar-002","Read the complete contents of a file as text",GH,gh_args),
 ("similar-003","Create or update a single file in the remote repository",FSW,{}),
 ("similar-004","Create a new file or completely overwrite an existing file with new content",GHW,{}),
 ("similar-005","Shows the commit logs",GHL,{}),
 ("similar-006","Get list of commits of a branch in the repository",GITL,{}),
 ("similar-007","Search for nodes based on a query",FSS,{}),
 ("similar-008","Search for code across repositories",MEM,{}),
 ("similar-009","Recursively search for paths and directories matching a glob pattern",GHS,{}),
 ("similar-010","Creates a new branch from an optional base branch",GHB,{}),
 ("similar-011","Create a new branch in the hosted repository",GITB,{}),
 ("priority-001","Do it",FS,gh_args),
 ("priority-002","ok",GH,{}),
 ("priority-003","yes",GHW,{}),
 ("priority-004","next",GITB,{}),
 ("priority-005","proceed",GITL,{}),
 ("priority-006","go",MEM,{}),
]
LABELS={'similar-001': ('github', 'get_file_contents', 'cosine-similarity', ['filesystem']), 'similar-002': ('filesystem', 'read_file', 'cosine-similarity', ['github']), 'similar-003': ('github', 'create_or_update_file', 'cosine-similarity', ['filesystem']), 'similar-004': ('filesystem', 'write_file', 'cosine-similarity', ['github']), 'similar-005': ('git', 'git_log', 'cosine-similarity', ['github']), 'similar-006': ('github', 'list_commits', 'cosine-similarity', ['git']), 'similar-007': ('memory', 'search_nodes', 'cosine-similarity', ['filesystem', 'github']), 'similar-008': ('github', 'search_code', 'cosine-similarity', ['filesystem', 'memory']), 'similar-009': ('filesystem', 'search_files', 'cosine-similarity', ['github', 'memory']), 'similar-010': ('git', 'git_create_branch', 'cosine-similarity', ['github']), 'similar-011': ('github', 'create_branch', 'cosine-similarity', ['git']), 'priority-001': ('filesystem', 'read_file', 'priority-order', ['github']), 'priority-002': ('filesystem', 'read_file', 'priority-order', ['github']), 'priority-003': ('filesystem', 'write_file', 'priority-order', ['github']), 'priority-004': ('github', 'create_branch', 'priority-order', ['git']), 'priority-005': ('github', 'list_commits', 'priority-order', ['git']), 'priority-006': ('filesystem', 'search_files', 'priority-order', ['github', 'memory'])}
for id,p,called,args in cp:
    case(id,p,*called,args,*LABELS[id])
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'golden_tasks.jsonl'), 'w') as f:
    for c in cases: f.write(json.dumps(c)+"\n")
print(len(cases))
