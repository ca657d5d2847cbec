"""Insert benchmark: the same as `seqid bench` (see seqid_orm.bench and `seqid bench --help`)."""

import sys

from seqid_orm.__main__ import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
