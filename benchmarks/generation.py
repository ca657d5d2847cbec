"""Generation benchmark: ids per second, side by side with uuid.uuid4() (see seqid_orm.bench.generation)."""

from seqid_orm.bench.generation import main

if __name__ == "__main__":
    main()
