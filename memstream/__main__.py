from memstream.cli import main

raise SystemExit(main())
