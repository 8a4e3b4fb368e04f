from xpubench.cli import main

raise SystemExit(main())
