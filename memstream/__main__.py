from memstream.cli.main import main

raise SystemExit(main())
