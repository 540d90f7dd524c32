from specllama.cli.main import main

raise SystemExit(main())
